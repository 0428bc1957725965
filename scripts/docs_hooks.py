"""MkDocs hooks of the documentation site (mkdocs.yml): reference pages generated from the code.

``reference/cli.md`` is written at build time from the typer application itself (every
command, argument and option with its help, default and environment variable, and the
command's examples), so the page cannot fall behind the command line.

The column tables of ``results-schema.md`` are filled in the same way: each
``<!-- columns: NAME -->`` marker of that page becomes the table of the Arrow schema ``NAME`` of
``crabray.results.store.schema`` (every column with its type, nullability and the description its
field metadata carries). The build fails when a marker names no schema or a schema of that
module has no marker, so a new table cannot go undocumented.
"""

from __future__ import annotations

import re
from typing import Any

CLI_PAGE = "reference/cli.md"

SCHEMA_PAGE = "results-schema.md"

COLUMNS_MARKER = re.compile(r"^<!-- columns: (\w+) -->$", flags=re.M)

CLI_INTRO = """# Command line

Every command of `crabray`, generated from the command itself when this site is built: what
`crabray COMMAND --help` shows, in one page. Options go after the command, except the
top-level `-v`/`--verbose` and `--version` (`crabray -v run ...`).
"""


def _cell(text: str) -> str:
    """Text made safe for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "&#124;")


def _names(param: Any) -> str:
    """An option's spellings (``--pool / --no-pool``, ``--agent, -a``), or an argument's name."""
    if param.param_type_name == "argument":
        return f"`{(param.metavar or param.name).upper()}`"
    names = ", ".join(f"`{opt}`" for opt in param.opts)
    if param.secondary_opts:
        names += " / " + ", ".join(f"`{opt}`" for opt in param.secondary_opts)
    return names


def _default(param: Any) -> str:
    """The default the help shows: a declared ``show_default`` text, else the value itself."""
    spellings = [*param.opts, *param.secondary_opts]
    if isinstance(param.show_default, str):
        flag = f"--{param.show_default}"
        return f"`{flag if flag in spellings else param.show_default}`"
    if getattr(param, "is_flag", False) and isinstance(param.default, bool) and len(spellings) > 1:
        return f"`{param.opts[0] if param.default else param.secondary_opts[0]}`"
    if param.default is None or param.default == () or param.default == []:
        return ""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    return f"`{param.default}`"


def _value(param: Any, ctx: Any) -> str:
    """What the option takes (``int >= 1``, ``path``), as --help shows it; nothing for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    shown = param.display_type(ctx) if hasattr(param, "display_type") else ""
    text = shown.strip("<>").replace(" range", "")
    if text.startswith("list[") and text.endswith("]"):
        text = text[len("list[") : -1]
    limits = ((">=", getattr(param, "min", None)), ("<=", getattr(param, "max", None)))
    bounds = [f"{sign} {limit}" for sign, limit in limits if limit is not None]
    return f"`{' '.join([text, *bounds])}`" if text else ""


def _meaning(param: Any) -> str:
    """The help text, with the environment variable read and the range allowed."""
    text = getattr(param, "help", None) or ""
    envvar = getattr(param, "envvar", None)
    if envvar:
        text += f" Environment variable: `{envvar}`."
    if getattr(param, "required", False):
        text += " Required."
    if getattr(param, "multiple", False) and "repeatable" not in text:
        text += " Repeatable."
    return _cell(text)


def _params_table(params: list[Any], ctx: Any) -> list[str]:
    rows = ["| name | value | default | meaning |", "| --- | --- | --- | --- |"]
    for param in params:
        cells = [_names(param), _value(param, ctx), _default(param), _meaning(param)]
        rows.append(f"| {' | '.join(cells)} |")
    return rows


def _command_section(command: Any, ctx: Any, depth: int) -> list[str]:
    """The Markdown of one command: usage, help, arguments, options and examples."""
    path = ctx.command_path
    lines = [f"{'#' * min(depth, 4)} `{path}`", ""]
    help_text = (command.help or "").strip()
    if help_text:
        lines += [help_text, ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"{path} {usage}", "```", ""]
    visible = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in visible if p.param_type_name == "argument"]
    options = [p for p in visible if p.param_type_name == "option"]
    if arguments:
        lines += ["Arguments:", "", *_params_table(arguments, ctx), ""]
    if options:
        lines += ["Options:", "", *_params_table(options, ctx), ""]
    if command.epilog:
        lines += ["```text", command.epilog.strip(), "```", ""]
    return lines


def cli_reference() -> str:
    """The whole command line as Markdown, walked from ``crabray.cli.app``."""
    import typer

    from crabray.cli import app

    root = typer.main.get_command(app)
    ctx_class = type(root.make_context("crabray", ["--help"], resilient_parsing=True))
    lines = [CLI_INTRO]

    def walk(command: Any, ctx: Any, depth: int) -> None:
        lines.extend(_command_section(command, ctx, depth))
        if not hasattr(command, "list_commands"):
            return
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            walk(sub, ctx_class(sub, parent=ctx, info_name=name), depth + 1)

    walk(root, ctx_class(root, info_name="crabray"), 2)
    return "\n".join(lines)


def results_schemas() -> dict[str, Any]:
    """Every Arrow schema of ``crabray.results.store.schema`` by its name (``EPISODES_SCHEMA``)."""
    import pyarrow as pa

    from crabray.results.store import schema

    return {name: value for name, value in vars(schema).items() if isinstance(value, pa.Schema)}


def columns_table(schema: Any) -> str:
    """One schema's columns as a Markdown table: name, Arrow type, nullable, meaning."""
    rows = ["| column | type | nullable | meaning |", "| --- | --- | --- | --- |"]
    for field in schema:
        metadata = field.metadata or {}
        description = metadata.get(b"description", b"").decode()
        if not description.strip():
            raise ValueError(f"column {field.name!r} has no description in its field metadata")
        nullable = "yes" if field.nullable else "no"
        rows.append(f"| `{field.name}` | `{field.type}` | {nullable} | {_cell(description)} |")
    return "\n".join(rows)


def fill_columns(markdown: str) -> str:
    """``markdown`` with each ``<!-- columns: NAME -->`` marker replaced by that schema's table.

    Raises:
        ValueError: A marker names no schema, or a schema has no marker.
    """
    schemas = results_schemas()
    named = COLUMNS_MARKER.findall(markdown)
    unknown = sorted(set(named) - set(schemas))
    missing = sorted(set(schemas) - set(named))
    if unknown or missing:
        raise ValueError(
            f"{SCHEMA_PAGE}: column markers naming no schema of crabray.results.store.schema: "
            f"{unknown}; schemas without a marker: {missing}"
        )
    return COLUMNS_MARKER.sub(lambda match: columns_table(schemas[match.group(1)]), markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill the column tables of the results schema page from the Arrow schemas."""
    if page.file.src_uri != SCHEMA_PAGE:
        return markdown
    from mkdocs.exceptions import PluginError

    try:
        return fill_columns(markdown)
    except ValueError as exc:
        raise PluginError(str(exc)) from exc


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    return files
