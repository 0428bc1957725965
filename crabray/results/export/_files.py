"""Where exports land: file names made from task, agent and suite names, written whole."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from crabray.core.errors import ResultsError
from crabray.results.store._layout import TMP_PREFIX

_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def safe_name(text: str) -> str:
    """``text`` as a file name part: letters, digits, ``.`` and ``-`` only.

    Names are data (a task id may hold ``/`` or spaces); a name that had to change
    gets a short hash of the original, so two names never become one file. No
    ``_`` either: Inspect splits a log's file name at ``_`` into time, task and id.
    """
    cleaned = _UNSAFE.sub("-", text).strip(".-") or "x"
    if cleaned == text:
        return text
    return f"{cleaned[:80]}-{short_hash(text)}"


def short_hash(*parts: str, length: int = 8) -> str:
    """A stable hexadecimal digest of ``parts``: the same names give the same id every export."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:length]


def parsed_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Call arguments as an object, and why not when the text is no JSON object.

    The formats want an object; a model may write anything. The text that is not
    one is kept by the caller beside an empty object, never dropped.
    """
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not JSON: {exc}"
    if not isinstance(value, dict):
        return {}, f"arguments are JSON but not an object: {text[:200]}"
    return value, None


def write_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole: to a temporary name beside it, then renamed over it.

    A reader of the export folder (``inspect view`` watching it) never sees half a file.

    Raises:
        ResultsError: The file could not be written (the message names it and why).
    """
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        raise ResultsError(f"could not write {path}: {exc.strerror or exc}") from exc
