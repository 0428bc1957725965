"""Files an episode produces travel back to the driver and land next to the dataset."""

from __future__ import annotations

import struct
import textwrap
import zlib
from pathlib import Path

import pytest

from crabray.results import read_steps
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SUITE = textwrap.dedent(
    '''
    import struct, zlib
    from typing import Any
    from crabray import BenchmarkConfig, EnvironmentConfig, Task, action
    from crabray.actions import FILE_ACTIONS, path_exists, write_file


    def png(shade: int) -> bytes:
        """A real 2x2 grey PNG."""
        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
        rows = b"".join(b"\\x00" + bytes([shade, shade]) for _ in range(2))
        header = struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)
        return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


    @action
    def screen(env: Any) -> bytes:
        """A picture of the screen: darker as files appear."""
        count = len(env.exec(["ls", "-A"]).stdout.split())
        return png(200 - 50 * count)


    ENV = EnvironmentConfig(name="desk", action_space=[*FILE_ACTIONS], observation_space=[screen])
    shots = BenchmarkConfig(
        name="shots",
        environments=[ENV],
        tasks=[
            Task(id="two-files", description="write a and b", evaluator=path_exists(path="b"),
                 solution=[write_file(path="a", content="1"), write_file(path="b", content="2")])
        ],
    )
    '''
)


def test_screenshots_land_next_to_the_dataset(tmp_path: Path) -> None:
    suite = tmp_path / "shots.py"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 0, done.stderr
    steps = read_steps(out).sort_values("step")
    paths = list(steps.screenshot_path)
    assert len(paths) == 2 and all(paths), "every step records what the agent saw"
    first, second = (out / p for p in paths)
    assert first.read_bytes().startswith(b"\x89PNG")
    assert first.read_bytes() != second.read_bytes(), "each step's own screenshot"
    shade = zlib.decompress(_idat(second.read_bytes()))[1]
    assert shade == 150, "the second screenshot was taken after the first file was written"
    assert steps.observation.iloc[0].startswith("[desk/screen] [image: screen]")
    site = crabray("leaderboard", str(out), "--html", str(tmp_path / "site"))
    assert site.returncode == 0, site.stderr
    assert list((tmp_path / "site").rglob("*.png")), "the site shows them"


def _idat(png: bytes) -> bytes:
    offset = 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind = png[offset + 4 : offset + 8]
        if kind == b"IDAT":
            return png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    raise AssertionError("no IDAT chunk")
