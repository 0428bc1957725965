"""``read_toml``: a TOML file the user wrote (a run file, an agents file), or an error naming it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from crabray.core.errors import ConfigError


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The tables of the TOML file at ``path``, which holds ``what`` ("run file", ...).

    Raises:
        ConfigError: The file cannot be read, or is not TOML; the message names it.
    """
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", file=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from exc
