"""The documentation site builds with --strict, and what it generates from the code is there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.core.result import TerminationReason
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built as CI builds it: strict, so a warning (a broken link) fails the build."""
    out = tmp_path_factory.mktemp("docs-site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-5000:]}"
    return out


def test_cli_reference_lists_every_command_and_option(site: Path) -> None:
    from typer.main import get_command

    from crabray.cli import app

    page = (site / "reference" / "cli" / "index.html").read_text()
    root = get_command(app)
    ctx = root.make_context("crabray", ["--help"], resilient_parsing=True)
    run = root.get_command(ctx, "run")
    assert run is not None
    for param in run.params:
        if param.param_type_name == "option" and not param.hidden:
            assert f"<code>{param.opts[0]}</code>" in page, f"{param.opts[0]} missing"
    for name in root.list_commands(ctx):
        assert f"crabray {name}" in page


def test_api_reference_is_generated_from_docstrings(site: Path) -> None:
    from crabray import BenchmarkConfig
    from crabray.results import read_episodes

    page = (site / "reference" / "api" / "index.html").read_text()
    for documented in (BenchmarkConfig, read_episodes):
        summary = (documented.__doc__ or "").strip().splitlines()[0]
        assert summary in page, f"{documented.__name__}'s docstring is not on the API page"


def test_results_schema_tables_are_generated_from_the_schemas(site: Path) -> None:
    from crabray.results import EPISODES_SCHEMA, STEPS_SCHEMA

    page = (site / "results-schema" / "index.html").read_text()
    assert "<!-- columns:" not in page
    for schema in (EPISODES_SCHEMA, STEPS_SCHEMA):
        for field in schema:
            cell = f"<td><code>{field.name}</code></td>"
            assert cell in page, f"column {field.name} missing from the results schema page"


def test_termination_page_lists_every_reason() -> None:
    page = (ROOT / "docs" / "reference" / "termination.md").read_text()
    reasons = page.split("\n## ")[0]  # the first table; later ones (preflight) list other things
    listed = re.findall(r"^\| `([a-z_]+)` \|", reasons, flags=re.M)
    assert listed == [reason.value for reason in TerminationReason]


def test_readme_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [target for target in targets if "://" not in target]
    assert local, "the README links into docs/"
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
