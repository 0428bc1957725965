"""A private virtual screen (Xvfb) for a host sandbox, and PNG screenshots of it.

The local backend owns one ``DisplayHook`` per sandbox: with the ``display``
setting on, ``start()`` starts an ``Xvfb`` server on a free display number,
every command the sandbox runs gets ``DISPLAY`` pointing at it, ``reset()``
replaces it with a fresh server (no window survives an episode), and
``close()`` kills it. With the setting off the hook does nothing and
``screenshot()`` says the sandbox has no screen.

Screenshots are taken with ``xwd -root`` (Debian's ``x11-apps``, present in
any X image) and turned into PNG here with Pillow, so a backend that can only
fetch files from its sandbox (a container) can reuse :func:`xwd_to_png`.
The smaller copies vision models are usually given are made by
:func:`crabray.core.images.downscale_png`.

Example:
    >>> parse_screen("1024x768x24")
    Screen(width=1024, height=768, depth=24)
    >>> parse_screen(True)
    Screen(width=1280, height=800, depth=24)
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

DEFAULT_SCREEN = "1280x800x24"
"""The screen ``display: true`` asks for: width x height x colour depth."""

INSTALL_HINT = "apt-get install xvfb xdotool x11-apps"
"""The Debian packages a sandbox with a screen needs on its host."""

START_TIMEOUT_SEC = 10.0
"""How long a new Xvfb may take to start listening before start() gives up."""

GRAB_TIMEOUT_SEC = 20.0
"""How long one screenshot may take."""

_SCREEN_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*(?:x\s*(\d+))?\s*$")
_DEPTHS = (24,)
"""Colour depths supported end to end (Xvfb, xwd, the PNG conversion)."""
_MIN_SIDE, _MAX_SIDE = 16, 8192


@dataclass(frozen=True)
class Screen:
    """The size of a virtual screen in pixels, and its colour depth in bits."""

    width: int
    height: int
    depth: int = 24

    def __str__(self) -> str:
        return f"{self.width}x{self.height}x{self.depth}"


def parse_screen(value: bool | str) -> Screen | None:
    """The screen a ``display`` setting asks for, or ``None`` when it is off.

    Args:
        value: ``False`` (no screen), ``True`` (``DEFAULT_SCREEN``) or ``"WxH"``/``"WxHxD"``.

    Raises:
        ValueError: The text is not ``WxH[xD]``, a side is outside 16..8192, or the
            depth is not 24.
    """
    if value is False:
        return None
    text = DEFAULT_SCREEN if value is True else value
    match = _SCREEN_RE.match(text)
    if match is None:
        raise ValueError(
            f"display must be true, false or a screen size like '{DEFAULT_SCREEN}' "
            f"(width x height x depth), got {text!r}"
        )
    width, height = int(match[1]), int(match[2])
    depth = int(match[3]) if match[3] else 24
    for side, what in ((width, "width"), (height, "height")):
        if not _MIN_SIDE <= side <= _MAX_SIDE:
            raise ValueError(f"display {what} must be {_MIN_SIDE}..{_MAX_SIDE} pixels, got {side}")
    if depth not in _DEPTHS:
        raise ValueError(f"display depth must be one of {list(_DEPTHS)}, got {depth}")
    return Screen(width, height, depth)


def _check_display(value: bool | str) -> bool | str:
    parse_screen(value)
    return value


DisplaySetting = Annotated[bool | str, AfterValidator(_check_display)]
"""A backend setting type: ``false``, ``true`` or ``"WxHxD"``, checked when settings load."""


def missing_tools() -> list[str]:
    """The programs a screen needs that this host lacks (empty when all are there)."""
    return [tool for tool in ("Xvfb", "xdotool", "xwd") if shutil.which(tool) is None]


class VirtualDisplay:
    """One running Xvfb server on a free display number.

    Args:
        screen: Its size and depth.
        label: Who it serves, for messages (the environment name).
        cwd: Directory the server runs in; the local backend passes the sandbox
            root, so its orphan sweep (processes whose cwd is inside) finds it.

    Raises:
        SandboxError: Xvfb is not installed, or did not come up in time.
    """

    def __init__(self, screen: Screen, label: str, cwd: Path | None = None) -> None:
        self.screen = screen
        self.label = label
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self.number: int | None = None
        self._start()

    @property
    def name(self) -> str:
        """The ``DISPLAY`` value, e.g. ``:3``."""
        return f":{self.number}"

    @property
    def pid(self) -> int | None:
        """The Xvfb process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def socket_path(self) -> str:
        """The server's Unix socket: what a confined sandbox must be able to reach."""
        return f"/tmp/.X11-unix/X{self.number}"

    def _start(self) -> None:
        xvfb = shutil.which("Xvfb")
        if xvfb is None:
            raise SandboxError(
                f"the screen of '{self.label}' needs Xvfb, which is not installed on this host; "
                f"install it with: {INSTALL_HINT}"
            )
        argv = [xvfb, "-screen", "0", str(self.screen), "-nolisten", "tcp", "-noreset"]
        with tempfile.TemporaryFile() as log:
            read_fd, write_fd = os.pipe()
            try:
                proc = subprocess.Popen(
                    [*argv, "-displayfd", str(write_fd)],
                    pass_fds=(write_fd,),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=self._cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                os.close(read_fd)
                raise SandboxError(f"cannot start Xvfb for '{self.label}': {exc}") from exc
            finally:
                os.close(write_fd)
            try:
                number = _read_display_number(read_fd, proc, START_TIMEOUT_SEC)
            finally:
                os.close(read_fd)
            if number is None:
                _kill(proc)
                log.seek(0)
                output = log.read().decode(errors="replace").strip()[-2000:]
                raise SandboxError(
                    f"Xvfb for '{self.label}' ({self.screen}) did not start within "
                    f"{START_TIMEOUT_SEC:g} s (exit code {proc.returncode}): "
                    f"{output or 'no output'}"
                )
        self._proc, self.number = proc, number
        logger.debug(
            "Xvfb %s (%s) for '%s' runs as pid %d", self.name, self.screen, self.label, proc.pid
        )

    def restart(self) -> None:
        """Replace the server with a fresh one: every window and client is gone.

        Raises:
            SandboxError: The new server did not start.
        """
        self.close()
        self._start()

    def screenshot(self) -> bytes:
        """The whole screen as a PNG.

        Raises:
            SandboxError: The server is gone, ``xwd`` is missing or failed.
        """
        if self._proc is None or self._proc.poll() is not None:
            raise SandboxError(f"the X server of '{self.label}' is not running")
        xwd = shutil.which("xwd")
        if xwd is None:
            raise SandboxError(
                f"screenshots of '{self.label}' need xwd, which is not installed on this host; "
                f"install it with: {INSTALL_HINT}"
            )
        try:
            done = subprocess.run(
                [xwd, "-root", "-silent", "-display", self.name],
                capture_output=True,
                timeout=GRAB_TIMEOUT_SEC,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"screenshot of '{self.label}' failed: {exc}") from exc
        if done.returncode != 0:
            raise SandboxError(
                f"screenshot of '{self.label}' failed: xwd exited {done.returncode}: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return xwd_to_png(done.stdout)

    def close(self) -> None:
        """Kill the server (and anything left in its process group); harmless twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _kill(proc)
        logger.debug("stopped Xvfb %s of '%s'", self.name, self.label)


class DisplayHook:
    """What a host backend calls to give its sandbox a screen, when its settings ask.

    With ``setting`` off every method is a no-op, ``env`` is empty and
    ``screenshot()`` raises the backend's "no screen" error.

    Args:
        setting: The backend's ``display`` setting (``False``, ``True`` or ``"WxHxD"``).
        label: The environment name, for messages.
    """

    def __init__(self, setting: bool | str, label: str) -> None:
        self.screen = parse_screen(setting)
        self.label = label
        self.display: VirtualDisplay | None = None

    @property
    def env(self) -> dict[str, str]:
        """Variables every sandbox command gets: ``DISPLAY`` when there is a screen."""
        return {"DISPLAY": self.display.name} if self.display is not None else {}

    def start(self, cwd: Path | None = None) -> None:
        """Start the server, when the setting asks for one.

        Raises:
            SandboxError: Xvfb is missing or did not come up.
        """
        if self.screen is not None and self.display is None:
            self.display = VirtualDisplay(self.screen, self.label, cwd)

    def reset(self) -> None:
        """Give the sandbox a fresh, empty screen (a new server).

        Raises:
            SandboxError: The new server did not start.
        """
        if self.display is not None:
            self.display.restart()

    def screenshot(self) -> bytes:
        """The screen as PNG.

        Raises:
            SandboxError: There is no screen (setting off, or not started), or the grab failed.
        """
        if self.display is None:
            hint = "" if self.screen is not None else " (set backend_settings.display: true)"
            raise SandboxError(f"the sandbox of '{self.label}' has no screen{hint}")
        return self.display.screenshot()

    def close(self) -> None:
        """Stop the server; harmless twice."""
        display, self.display = self.display, None
        if display is not None:
            display.close()


def xwd_to_png(data: bytes) -> bytes:
    """Convert an X window dump (``xwd`` output) of a 24/32-bit TrueColor screen to PNG.

    Args:
        data: What ``xwd -root -silent`` wrote.

    Returns:
        The PNG bytes, the same size as the dump.

    Raises:
        SandboxError: The dump is truncated or of a kind this does not read
            (a paletted or 16-bit screen).
    """
    from PIL import Image

    if len(data) < 100:
        raise SandboxError(f"not a screen dump: {len(data)} bytes")
    header = struct.unpack(">25I", data[:100])
    header_size, version, pixmap_format = header[0], header[1], header[2]
    width, height, byte_order = header[4], header[5], header[7]
    bits_per_pixel, bytes_per_line, visual_class = header[11], header[12], header[13]
    masks, ncolors = header[14:17], header[19]
    if version != 7 or pixmap_format != 2 or visual_class not in (4, 5):
        raise SandboxError(
            f"unsupported screen dump (version {version}, format {pixmap_format}, "
            f"visual class {visual_class}); expected a TrueColor ZPixmap"
        )
    if bits_per_pixel not in (24, 32):
        raise SandboxError(f"unsupported screen dump: {bits_per_pixel} bits per pixel")
    pixel_bytes = bits_per_pixel // 8
    rawmode = ["X"] * pixel_bytes
    for letter, mask in zip("RGB", masks, strict=True):
        shift = (mask & -mask).bit_length() - 1
        if mask >> shift != 0xFF or shift % 8:
            raise SandboxError(f"unsupported screen dump: colour mask {mask:#x}")
        index = shift // 8 if byte_order == 0 else pixel_bytes - 1 - shift // 8
        rawmode[index] = letter
    start = header_size + 12 * ncolors
    end = start + bytes_per_line * height
    if len(data) < end:
        raise SandboxError(f"truncated screen dump: {len(data)} bytes, expected {end}")
    image = Image.frombuffer(
        "RGB", (width, height), data[start:end], "raw", "".join(rawmode), bytes_per_line, 1
    )
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _read_display_number(
    read_fd: int, proc: subprocess.Popen[bytes], timeout_sec: float
) -> int | None:
    """Wait for Xvfb's ``-displayfd`` line (it is listening then); ``None`` if it never came."""
    deadline = time.monotonic() + timeout_sec
    received = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 0.1)
        if ready:
            chunk = os.read(read_fd, 64)
            if not chunk:
                break
            received += chunk
            if received.endswith(b"\n"):
                text = received.decode(errors="replace").strip()
                return int(text) if text.isdigit() else None
        elif proc.poll() is not None:
            break
    return None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop Xvfb with SIGTERM (it removes its socket and lock file), SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
