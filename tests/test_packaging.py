"""Packaging: the license as metadata and as text, one version source, a setup that reruns fast."""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from importlib.metadata import metadata, version

import pytest

import crabray
from tests.conftest import ROOT


def test_license_is_an_spdx_expression_with_its_text() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert metadata("crabray")["License-Expression"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text


def test_the_version_is_the_package_metadata() -> None:
    assert crabray.__version__ == version("crabray")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == crabray.__version__


def test_setup_does_not_reinstall_when_pyproject_is_unchanged() -> None:
    stamp = ROOT / ".venv" / ".crabray-setup"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    recorded = stamp.read_text().split() if stamp.is_file() else []
    if recorded[:1] != [wanted]:  # the stamp: the hash, then which install (dev, user)
        pytest.skip("setup.sh has not run since pyproject.toml changed: bash scripts/setup.sh")
    installed = sorted((ROOT / ".venv").glob("lib/python*/site-packages/crabray-*.dist-info"))
    assert installed, "crabray is installed in .venv"
    before = installed[0].stat().st_mtime_ns
    done = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "crabray is up to date in .venv" in done.stdout
    assert done.stderr == "", "no pip, no setuptools warnings"
    assert installed[0].stat().st_mtime_ns == before, "nothing was reinstalled"
