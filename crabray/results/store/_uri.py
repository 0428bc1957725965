"""What the text of a results root says by itself: a URL or a path, a store, and how to show it.

Pure string work (no pyarrow), shared by ``root`` and the modules that open stores.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse


def is_url(location: str | Path) -> bool:
    """Whether ``location`` is a URL (``scheme://...``, ``file://`` included), not a plain path."""
    return isinstance(location, str) and "://" in location


def shown_uri(uri: str) -> str:
    """``uri`` for messages: without keys given in it (``s3://KEY:SECRET@bucket/...``)."""
    parsed = urlparse(uri)
    if ":" not in parsed.netloc.rpartition("@")[0]:  # abfs://CONTAINER@ACCOUNT is no key
        return uri
    return parsed._replace(netloc=parsed.netloc.rsplit("@", 1)[1]).geturl()


def is_store(location: str | Path) -> bool:
    """Whether ``location`` is the URI of a store other than the local file system."""
    return is_url(location) and urlparse(str(location)).scheme != "file"


def local_dir(location: str | Path) -> Path | None:
    """The local directory ``location`` names (a path, a ``file://`` URL); ``None`` for a store."""
    if not is_url(location):
        return Path(location)
    parsed = urlparse(str(location))
    if parsed.scheme == "file":
        return Path(unquote(parsed.netloc + parsed.path))
    return None
