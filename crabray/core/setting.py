"""What a run's fields say of themselves beside their type: flag, resume rule, key.

Each part of a run's description (``crabray.run.RunSpec``) is declared by the
layer that uses it (how to read a suite in ``crabray.formats``, episode budgets
in ``crabray.episode``, execution in ``crabray.cluster.sweep``); the metadata
here rides on their fields, so that the command line's help and the resume's
rules are read from the fields and not kept in lists beside them.
"""

from __future__ import annotations

from typing import Literal

from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

ResumeRule = Literal["fixed", "kept"]
"""``fixed``: what the run's episodes are; a resume takes it from the run, and one given
must equal it. ``kept``: how the episodes run; a resume takes it from the run unless given,
and one given applies (a higher budget lets a stopped run go on)."""


def setting(
    flag: str | None = None, *, resume: ResumeRule | None = None, key: str | None = None
) -> JsonDict:
    """A field's metadata (``json_schema_extra``): flag, resume rule and run-file key.

    The key is given only where it differs from the field's name.
    """
    extra: dict[str, str | None] = {"flag": flag, "resume": resume, "key": key}
    return {name: value for name, value in extra.items() if value is not None}


def flag_of(name: str, field: FieldInfo) -> str:
    """The flag that sets ``field`` (named ``name``), as messages name it."""
    return _extra(field).get("flag") or f"--{name.replace('_', '-')}"


def resume_rule(field: FieldInfo) -> ResumeRule | None:
    """What a resume does with ``field``: ``fixed``, ``kept``, or nothing (the run's own)."""
    rule = _extra(field).get("resume")
    return rule if rule in ("fixed", "kept") else None  # type: ignore[return-value]


def key_of(name: str, field: FieldInfo) -> str:
    """``field``'s key in a run file and in a manifest's options: its name unless it says."""
    return _extra(field).get("key") or name


def _extra(field: FieldInfo) -> dict[str, str]:
    extra = field.json_schema_extra
    return {k: v for k, v in extra.items() if isinstance(v, str)} if isinstance(extra, dict) else {}
