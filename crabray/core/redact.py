"""Known secret values, replaced by a marker wherever text is kept or shown.

A model asked for its API key may repeat it; an agent may ``echo
$OPENAI_API_KEY`` in a sandbox that somehow has it. The driver knows the
secrets that matter (the agents' API keys, secret-looking variables of its
own environment), so it removes their values from every string of a result
(result fields, steps, messages, errors) before the result is written, and
from its log records. The site is built from the results, so it never sees
them. This is a last line of defence, not a sandbox: a secret an agent
transforms (reversed, base64) is not recognised.

Example:
    >>> Redactor(["sk-live-0123456789"]).text("key: sk-live-0123456789")
    'key: [redacted]'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

REDACTED = "[redacted]"
"""What a secret value is replaced with."""

MIN_SECRET_CHARS = 8
"""Shorter values are not treated as secrets: replacing them would mangle ordinary text."""

SECRET_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|ACCESS_?KEY|PRIVATE_?KEY)",
    re.IGNORECASE,
)
"""Environment variable names whose values are secrets (``OPENAI_API_KEY``, ``HF_TOKEN``)."""

Model = TypeVar("Model", bound=BaseModel)


def secrets_in_environment(environ: Mapping[str, str]) -> list[str]:
    """The values of ``environ``'s variables whose names look secret.

    Args:
        environ: Variables, usually ``os.environ``.
    """
    return [value for name, value in environ.items() if SECRET_NAME.search(name)]


class Redactor:
    """Replaces known secret values with ``REDACTED`` in text, data and pydantic models.

    Args:
        secrets: The values to hide; those under ``MIN_SECRET_CHARS`` characters
            and duplicates are dropped.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        # Longest first, so a secret containing another is replaced whole.
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in sorted(kept, key=len, reverse=True)))
            if kept
            else None
        )

    def __bool__(self) -> bool:
        """Whether there is any secret to replace."""
        return self._pattern is not None

    def text(self, value: str) -> str:
        """``value`` with every known secret replaced."""
        if self._pattern is None:
            return value
        return self._pattern.sub(REDACTED, value)

    def data(self, value: Any) -> Any:
        """``value`` with secrets replaced in every string inside it.

        Walks dicts (keys too), lists, tuples and pydantic models (a copy, field by
        field); bytes and other values come back unchanged.
        """
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, BaseModel):
            fields = type(value).model_fields
            return value.model_copy(update={n: self.data(getattr(value, n)) for n in fields})
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.data(v) for v in value)
        return value

    def model(self, value: Model) -> Model:
        """A copy of the pydantic model ``value`` with secrets replaced in every string."""
        redacted: Model = self.data(value)
        return redacted


class RedactingFilter(logging.Filter):
    """A logging filter that removes known secrets from each record's message.

    Put it on a handler: a handler's filters see the records of every logger
    below it, a logger's only its own.
    """

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; never drop it."""
        message = record.getMessage()
        redacted = self.redactor.text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = self.redactor.text(
                logging.Formatter().formatException(record.exc_info)
            )
            record.exc_info = None
        return True
