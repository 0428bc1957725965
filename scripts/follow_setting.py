"""Follow one run setting through the code: every function that takes, passes or reads it.

    python scripts/follow_setting.py concurrency
    python scripts/follow_setting.py out_dir --from crabray/cli/run.py

Reads the source (nothing is run) and lists, file by file, each function
where the name occurs as a parameter, a keyword argument (``concurrency=...``)
or an attribute (``spec.execution.concurrency``), with the lines. A setting
that travels under one name is found at every stop; the count of files is the
number of stops from the command line to the setting's uses.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def occurrences(tree: ast.AST, name: str) -> Iterator[tuple[str, int, str]]:
    """(function, line, how) for each place ``name`` is taken, passed or read."""
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = function.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if arg.arg == name:
                yield function.name, arg.lineno, "parameter"
        for node in ast.walk(function):
            if isinstance(node, ast.keyword) and node.arg == name:
                yield function.name, node.value.lineno, "passed"
            elif isinstance(node, ast.Attribute) and node.attr == name:
                yield function.name, node.lineno, "read"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="The setting's name (a RunSpec field), e.g. concurrency.")
    parser.add_argument(
        "--from", dest="start", default="crabray", help="Only files under this path."
    )
    options = parser.parse_args()
    files = (
        sorted((ROOT / options.start).rglob("*.py"))
        if (ROOT / options.start).is_dir()
        else [ROOT / options.start]
    )
    stops = 0
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found: dict[str, list[str]] = {}
        for function, line, how in occurrences(tree, options.name):
            found.setdefault(function, []).append(f"{line} {how}")
        if not found:
            continue
        stops += 1
        print(path.relative_to(ROOT))
        for function, places in found.items():
            print(f"  {function}: {', '.join(dict.fromkeys(places))}")
    print(f"{stops} files hold {options.name!r}")


if __name__ == "__main__":
    main()
