"""The live site behind ``crabray view``, served in-process and fetched over HTTP."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from crabray.core.errors import CrabrayError, ResultsError
from crabray.results import ResultSink
from crabray.results.site import make_server
from tests.site.conftest import RUN_ID, SCREENSHOT, SUITE_NAME, SiteDataset, episode, png_bytes


@pytest.fixture
def server(dataset: SiteDataset) -> Iterator[ThreadingHTTPServer]:
    httpd = make_server(dataset.out, port=0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


def _get(server: ThreadingHTTPServer, path: str) -> tuple[int, str, bytes]:
    url = f"http://127.0.0.1:{server.server_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def test_binds_localhost_and_serves_index(server: ThreadingHTTPServer) -> None:
    assert server.server_address[0] == "127.0.0.1"
    status, kind, body = _get(server, "/")
    assert status == 200 and kind.startswith("text/html")
    assert b'id="leaderboard"' in body
    assert _get(server, "/index.html")[2] == body


def test_serves_episode_pages_and_screenshots(
    server: ThreadingHTTPServer, dataset: SiteDataset
) -> None:
    status, _, body = _get(server, f"/episodes/{dataset.graph_episode_id}.html")
    assert status == 200
    assert f'src="../files/{SCREENSHOT}"'.encode() in body
    status, kind, image = _get(server, f"/files/{SCREENSHOT}")
    assert (status, kind, image) == (200, "image/png", png_bytes())


def test_serves_the_side_by_side_page(server: ThreadingHTTPServer, dataset: SiteDataset) -> None:
    status, kind, body = _get(server, "/side-by-side.html")
    assert status == 200 and kind.startswith("text/html")
    assert b'<iframe id="side-a"' in body and b'<iframe id="side-b"' in body
    # The episode pages it frames are the served ones, which link back to it.
    other = dataset.episode_ids[3]  # t-one by gamma, beside t-one by beta
    page = _get(server, f"/episodes/{dataset.episode_ids[1]}.html")[2]
    assert f"../side-by-side.html?a={dataset.episode_ids[1]}&amp;b={other}".encode() in page


@pytest.mark.parametrize(
    "path",
    [
        "/episodes/nope.html",
        "/files/../../../etc/passwd",
        "/files/%2e%2e/%2e%2e/etc/passwd",
        "/files/episodes",  # a directory of the dataset, not an image
        "/runs/",
        "/favicon.ico",
    ],
)
def test_unknown_and_escaping_paths_are_404(server: ThreadingHTTPServer, path: str) -> None:
    status, _, body = _get(server, path)
    assert status == 404
    assert b"root:" not in body


def test_new_episodes_appear_on_the_next_request(
    server: ThreadingHTTPServer, dataset: SiteDataset
) -> None:
    before = _get(server, "/")[2]
    assert b"late-task" not in before
    late = episode("late-task", "beta", steps=4, success=True)
    ResultSink(dataset.out, RUN_ID).write([late])
    after = _get(server, "/")[2]
    assert b"late-task" in after
    assert _get(server, f"/episodes/{late.result.episode_id}.html")[0] == 200


def test_an_unreadable_part_file_is_a_500_page_naming_it(
    server: ThreadingHTTPServer, dataset: SiteDataset
) -> None:
    broken = dataset.out / "episodes" / f"run_id={RUN_ID}" / "part-9-broken.parquet"
    broken.write_bytes(b"not parquet")
    status, _, body = _get(server, "/")
    assert status == 500
    assert b"part-9-broken.parquet" in body
    broken.unlink()
    assert _get(server, "/")[0] == 200


def test_refuses_a_missing_directory_and_a_busy_port(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="not a results directory"):
        make_server(tmp_path / "missing")
    (tmp_path / "out").mkdir()
    first = make_server(tmp_path / "out", port=0)
    try:
        with pytest.raises(CrabrayError, match="cannot serve on"):
            make_server(tmp_path / "out", port=first.server_port)
    finally:
        first.server_close()


def test_live_json_run_pages_and_compare(server: ThreadingHTTPServer, dataset: SiteDataset) -> None:
    status, kind, body = _get(server, "/live.json")
    assert status == 200 and kind == "application/json"
    before = json.loads(body)
    assert before["episodes"] == 5 and before["version"]
    assert _get(server, "/live.json")[2] == body, "unchanged data, unchanged version"
    status, _, page = _get(server, f"/run-{RUN_ID}.html")
    assert status == 200 and f'id="scope">run {RUN_ID} ({SUITE_NAME}, created '.encode() in page
    assert b'data-live="live.json"' in page
    assert _get(server, "/run-nope.html")[0] == 404
    assert _get(server, "/compare.html")[0] == 200
    ResultSink(dataset.out, RUN_ID).write([episode("late", "beta", steps=1, success=True)])
    after = json.loads(_get(server, "/live.json")[2])
    assert after["episodes"] == 6 and after["version"] != before["version"]


def test_a_run_page_links_the_runs_log_which_is_served_as_text(
    server: ThreadingHTTPServer, dataset: SiteDataset
) -> None:
    from crabray.results import run_log_path

    run_log_path(dataset.out, RUN_ID).write_text("2026-01-01 00:00:00 UTC INFO crabray: hello\n")
    status, _, page = _get(server, f"/run-{RUN_ID}.html")
    assert status == 200
    assert f'<a href="logs/{RUN_ID}.log">'.encode() in page
    status, kind, body = _get(server, f"/logs/{RUN_ID}.log")
    assert (status, kind) == (200, "text/plain; charset=utf-8")
    assert body.endswith(b"INFO crabray: hello\n")
    # Only the log of a run of this results root, by its id: nothing else of the disk.
    for path in ("/logs/nope.log", "/logs/..%2F..%2Fetc%2Fpasswd.log", f"/logs/{RUN_ID}.json"):
        assert _get(server, path)[0] == 404, path
