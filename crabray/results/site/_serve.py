"""``crabray view``: the site served from the live dataset, rebuilt when the data changes.

A sweep keeps appending part files; every request checks the dataset's
fingerprint (file names, sizes, times) and re-reads only when it changed. The
index and run pages poll ``/live.json`` (the dataset's version and episode
count) every few seconds; when the version changes, the page fetches itself
again and swaps its sections in place, so new episodes appear while a run is
going without a reload losing the reader's place.
The server binds 127.0.0.1 unless told otherwise: results hold task text and
agent output that are not meant for the network.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from crabray.core.errors import CrabrayError, ResultsError
from crabray.results.site._data import (
    Fingerprint,
    SiteData,
    existing_screenshot,
    fingerprint,
    load,
    resolve_screenshot,
)
from crabray.results.site._episode import SIDE_BY_SIDE_PAGE, render_episode, render_side_by_side
from crabray.results.site._pages import (
    COMPARE_PAGE,
    EPISODES_DIR,
    FILES_DIR,
    LOGS_DIR,
    Live,
    episode_page_name,
    render_compare,
    render_index,
    render_message,
    run_log_url,
    run_page_name,
    screenshot_url,
)
from crabray.results.store.runs import run_log_path

logger = logging.getLogger(__name__)

LIVE_JSON = "live.json"
"""What served pages poll for the dataset's version."""

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"})
"""What ``/files/`` serves: screenshots only (never SVG, which could carry script)."""


class LiveSite:
    """Pages rendered from the dataset on demand, cached until the dataset changes.

    Args:
        out_dir: The results directory.
        run_id: Show only this run; every run when None.
        title: The site's title; the suite's name by default.
        description: The line under the title; the suite's path by default.
    """

    def __init__(
        self,
        out_dir: Path,
        run_id: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.run_id = run_id
        self.title = title
        self.description = description
        self._version = ""
        self._lock = threading.Lock()
        self._fingerprint: Fingerprint | None = None
        self._data: SiteData | None = None
        self._pages: dict[str, str] = {}
        self._names: dict[str, str] = {}

    def _current(self) -> SiteData:
        """The data as on disk now; re-read (and the page cache dropped) only after a change.

        Must be called with the lock held.
        """
        now = fingerprint(self.out_dir, self.run_id)
        if self._data is None or now != self._fingerprint:
            self._data = load(
                self.out_dir, self.run_id, title=self.title, description=self.description
            )
            self._fingerprint = now
            self._version = hashlib.sha256(repr(now).encode()).hexdigest()[:16]
            self._pages.clear()
            self._names = {
                episode_page_name(str(episode_id)): str(episode_id)
                for episode_id in self._data.all_episodes["episode_id"]
            }
            logger.info("dataset changed: %d episodes", len(self._data.episodes))
        return self._data

    def index(self) -> str:
        """The index page of the dataset as it is now."""
        with self._lock:
            data = self._current()
            if "index" not in self._pages:
                self._pages["index"] = render_index(data, Live(LIVE_JSON, self._version))
            return self._pages["index"]

    def run_page(self, name: str) -> str | None:
        """The page ``run-<RUN>.html`` of one run, or None when there is no such run."""
        with self._lock:
            data = self._current()
            run = next((r.run_id for r in data.runs if run_page_name(r.run_id) == name), None)
            if run is None:
                return None
            key = f"run:{run}"
            if key not in self._pages:
                live = Live(LIVE_JSON, self._version)
                log = run_log_url(run) if run_log_path(self.out_dir, run).is_file() else None
                self._pages[key] = render_index(data.for_run(run), live, log)
            return self._pages[key]

    def run_log(self, run_id: str) -> Path | None:
        """The log file of run ``run_id`` of this site, or None (no such run, or no log)."""
        with self._lock:
            if run_id not in {run.run_id for run in self._current().runs}:
                return None
        log = run_log_path(self.out_dir, run_id)
        return log if log.is_file() else None

    def compare(self) -> str:
        """The page comparing two runs."""
        with self._lock:
            data = self._current()
            if "compare" not in self._pages:
                self._pages["compare"] = render_compare(data)
            return self._pages["compare"]

    def side_by_side(self) -> str:
        """The page that frames two episode pages next to each other."""
        with self._lock:
            data = self._current()
            if "side-by-side" not in self._pages:
                self._pages["side-by-side"] = render_side_by_side(data)
            return self._pages["side-by-side"]

    def live(self) -> str:
        """``live.json``: the dataset's version (changes with every write) and episode count."""
        with self._lock:
            data = self._current()
            return json.dumps({"version": self._version, "episodes": len(data.episodes)})

    def episode(self, name: str) -> str | None:
        """The page ``episodes/<name>``, or None when no episode has that page name."""
        with self._lock:
            data = self._current()
            episode_id = self._names.get(name)
            if episode_id is None:
                return None
            key = f"episode:{name}"
            if key not in self._pages:
                rendered = render_episode(data, episode_id, self._screenshot_src)
                if rendered is None:
                    return None
                self._pages[key] = rendered
            return self._pages[key]

    def _screenshot_src(self, relative: str) -> str | None:
        return (
            None
            if existing_screenshot(self.out_dir, relative) is None
            else screenshot_url(relative)
        )

    def file(self, relative: str) -> Path | None:
        """The screenshot file at ``relative`` under the output directory, if it may be served."""
        try:
            path = resolve_screenshot(self.out_dir, relative)
        except ResultsError as exc:
            logger.warning("refused file request: %s", exc)
            return None
        if path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
            return None
        return path


def _handler(site: LiveSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Routes ``/``, ``/index.html``, ``/episodes/<page>``, ``/side-by-side.html``,
        ``/files/<screenshot>`` and ``/logs/<run>.log``."""

        server_version = "crabray-view"

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            try:
                if path in ("/", "/index.html"):
                    self._send(HTTPStatus.OK, site.index().encode(), "text/html; charset=utf-8")
                elif path == f"/{LIVE_JSON}":
                    self._send(HTTPStatus.OK, site.live().encode(), "application/json")
                elif path == f"/{COMPARE_PAGE}":
                    self._page_or_404(site.compare())
                elif path == f"/{SIDE_BY_SIDE_PAGE}":
                    self._page_or_404(site.side_by_side())
                elif path.startswith("/run-") and "/" not in path[1:]:
                    self._page_or_404(site.run_page(path[1:]))
                elif path.startswith(f"/{EPISODES_DIR}/"):
                    body = site.episode(path.removeprefix(f"/{EPISODES_DIR}/"))
                    self._page_or_404(body)
                elif path.startswith(f"/{LOGS_DIR}/") and path.endswith(".log"):
                    log = site.run_log(path.removeprefix(f"/{LOGS_DIR}/").removesuffix(".log"))
                    if log is None:
                        self._page_or_404(None)
                    else:
                        self._send(HTTPStatus.OK, log.read_bytes(), "text/plain; charset=utf-8")
                elif path.startswith(f"/{FILES_DIR}/"):
                    found = site.file(path.removeprefix(f"/{FILES_DIR}/"))
                    if found is None:
                        self._page_or_404(None)
                    else:
                        kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
                        self._send(HTTPStatus.OK, found.read_bytes(), kind)
                else:
                    self._page_or_404(None)
            except Exception as exc:  # a bad part file must show, not kill the server
                logger.exception("rendering %s failed", path)
                self._send(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    render_message("Could not render this page", str(exc)).encode(),
                    "text/html; charset=utf-8",
                )

        def _page_or_404(self, body: str | None) -> None:
            if body is not None:
                self._send(HTTPStatus.OK, body.encode(), "text/html; charset=utf-8")
                return
            missing = render_message("Not found")
            self._send(HTTPStatus.NOT_FOUND, missing.encode(), "text/html; charset=utf-8")

        def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")  # a reload must show new episodes
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            logger.info("%s %s", self.address_string(), format % args)

    return Handler


def make_server(
    out_dir: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    run_id: str | None = None,
    title: str | None = None,
    description: str | None = None,
) -> ThreadingHTTPServer:
    """An HTTP server of the live site; call ``serve_forever()`` on it, ``server_close()`` after.

    Threads serve requests (a browser keeps idle connections open, which would
    stall a single-threaded server); rendering is serialised inside ``LiveSite``.

    Args:
        out_dir: The results directory to show.
        host: Interface to bind; 127.0.0.1 keeps it on this machine.
        port: TCP port; 0 picks a free one (read it from ``server.server_port``).
        run_id: Show only this run; every run when None.
        title: The site's title; the suite's name by default.
        description: The line under the title; the suite's path by default.

    Raises:
        ResultsError: ``out_dir`` is not a directory.
        CrabrayError: The address cannot be bound (in use, not permitted).
    """
    out = Path(out_dir)
    if not out.is_dir():
        raise ResultsError(f"{out} is not a results directory (it does not exist)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving results on %s: anyone who can reach it can read them", host)
    site = LiveSite(out, run_id, title=title, description=description)
    try:
        server = ThreadingHTTPServer((host, port), _handler(site))
    except OSError as exc:
        raise CrabrayError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from exc
    server.daemon_threads = True
    return server
