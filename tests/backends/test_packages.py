"""Each backend is one package whose ``__init__`` is its public API.

The registry's shipped kinds resolve to the classes those packages export,
each class names its settings model, and no module of crabray outside a
backend's package imports one of its ``_``-prefixed modules or names.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from crabray.backends import backend_class

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "crabray"

EXPORTS = {
    "local": ("LocalBackend", "LocalSettings", None),
    "docker": ("DockerBackend", "DockerSettings", "docker"),
    "ssh": ("SshBackend", "SshSettings", "paramiko"),
    "vm": ("VmBackend", "VmSettings", "paramiko"),
}
"""Per shipped kind: the backend class and settings model its package exports, and the
optional dependency it needs."""


@pytest.mark.parametrize("kind", sorted(EXPORTS))
def test_each_kind_is_the_class_its_package_exports(kind: str) -> None:
    backend, settings, dependency = EXPORTS[kind]
    if dependency is not None:
        pytest.importorskip(dependency)
    package = importlib.import_module(f"crabray.backends.{kind}")
    assert {backend, settings} <= set(package.__all__)
    assert backend_class(kind) is getattr(package, backend)
    assert backend_class(kind).settings_model is getattr(package, settings)
    assert vars(getattr(package, backend))["kind"] == kind, "the class declares its own kind"


def test_no_module_imports_a_backend_packages_private_parts_from_outside() -> None:
    offenders = []
    for file in sorted(PACKAGE_ROOT.rglob("*.py")):
        module = ".".join(file.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                parts = name.split(".")
                private = next((i for i, p in enumerate(parts) if p.startswith("_")), None)
                if private is None or parts[:2] != ["crabray", "backends"]:
                    continue
                owner = ".".join(parts[:private])
                if not (module == owner or module.startswith(owner + ".")):
                    offenders.append(f"{module} imports {name}")
    assert offenders == []
