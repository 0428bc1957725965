"""Actions and evaluators for crabray/crab-desktop, written as CRAB writes them.

Plain functions without ``env``: each runs inside the sandbox (its guest
process), so ``pyautogui``, ``psutil`` and the file checks act on the
container's screen, processes and files, never the worker's. The evaluators
follow crab-benchmark-v0's Ubuntu ones (``check_file_exist`` is the seed's);
the ``wait_*`` actions are what a scripted solution needs to stay in step
with programs that start slowly under load: they wait on the event itself
(a window, a file, a process) up to a generous timeout, never on a fixed sleep.
"""

from __future__ import annotations

import os
import subprocess
import time

from crabray import action, evaluator

WAIT_SEC = 240.0
"""How long a wait action waits by default: LibreOffice's first start on a loaded host."""

CLICK_PAD = """
import sys, tkinter
root = tkinter.Tk()
root.title("click-pad")
root.geometry(f"{root.winfo_screenwidth()}x{root.winfo_screenheight()}+0+0")
def clicked(event):
    with open(sys.argv[1], "w") as out:
        out.write(f"{event.x_root} {event.y_root}")
root.bind("<Button-1>", clicked)
root.mainloop()
"""
"""A full-screen Tk window that writes where it was clicked to the file it is given."""


@action
def click(x: float, y: float) -> None:
    """
    click on the current desktop screen.

    Args:
        x (float): The X coordinate.
        y (float): The Y coordinate.
    """
    import pyautogui

    pyautogui.click(x, y)


@action
def open_click_pad(path: str) -> None:
    """Open a full-screen window that records where it is clicked in `path`.

    Args:
        path: The file the click's screen coordinates are written to.
    """
    subprocess.Popen(
        ["python3", "-c", CLICK_PAD, path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _show_window("click-pad", WAIT_SEC)


@action
def wait_for_window(name: str, timeout: float = WAIT_SEC) -> None:
    """Wait until a visible window whose title contains `name` is shown, then focus it.

    Args:
        name: Part of the window's title.
        timeout: Seconds to wait at most.
    """
    _show_window(name, timeout)


def _show_window(name: str, timeout: float) -> None:
    """Activate the newest visible window titled `name`, retrying until the window
    manager has it (a window just mapped may not be managed yet)."""
    deadline = time.monotonic() + timeout
    while True:
        found = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--name", name],
            capture_output=True,
            text=True,
        ).stdout.split()
        if found:
            try:
                activated = subprocess.run(
                    ["xdotool", "windowactivate", "--sync", found[-1]],
                    capture_output=True,
                    timeout=max(1.0, min(10.0, deadline - time.monotonic())),
                )
                if activated.returncode == 0:
                    return
            except subprocess.TimeoutExpired:
                pass  # not activated yet: look again
        if time.monotonic() > deadline:
            raise TimeoutError(f"no window titled {name!r} could be activated within {timeout} s")
        time.sleep(0.2)


@action
def wait_for_file(file_path: str, timeout: float = WAIT_SEC) -> None:
    """Wait until `file_path` exists and has stopped growing (its writer is done).

    Args:
        file_path: The file.
        timeout: Seconds to wait at most.
    """
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        size = os.path.getsize(file_path) if os.path.isfile(file_path) else -1
        if size > 0 and size == last:
            return
        last = size
        time.sleep(0.5)
    raise TimeoutError(f"{file_path} was not written within {timeout} s")


@action
def wait_for_exit(process_name: str, timeout: float = WAIT_SEC) -> None:
    """Wait until no process named `process_name` runs.

    Args:
        process_name: The process name, e.g. "vim".
        timeout: Seconds to wait at most.
    """
    deadline = time.monotonic() + timeout
    while _running(process_name):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{process_name} still runs after {timeout} s")
        time.sleep(0.2)


@evaluator(env_name="ubuntu")
def check_file_exist(file_path: str) -> bool:
    return os.path.isfile(file_path)


@evaluator(env_name="ubuntu")
def check_file_content(file_path: str, content: str) -> bool:
    if not os.path.isfile(file_path):
        return False
    with open(file_path) as f:
        return content in f.read()


@evaluator(env_name="ubuntu")
def is_process_open(process_name: str) -> bool:
    """Whether a process whose name contains `process_name` runs."""
    return _running(process_name)


def _running(process_name: str) -> bool:
    import psutil

    return any(
        process_name.lower() in (process.info["name"] or "").lower()
        for process in psutil.process_iter(["name"])
    )


@evaluator(env_name="ubuntu")
def check_current_window_process(name: str) -> bool:
    """Whether the focused window belongs to a process named `name`."""
    import psutil

    try:
        out = subprocess.check_output(
            ["xdotool", "getwindowfocus", "getwindowpid"], text=True, stderr=subprocess.DEVNULL
        ).strip()
        return out.isdigit() and psutil.Process(int(out)).name() == name
    except (subprocess.CalledProcessError, psutil.Error):
        return False


@evaluator(env_name="ubuntu")
def check_text_in_current_window_name(text: str) -> bool:
    """Whether the focused window's title contains `text`."""
    try:
        out = subprocess.check_output(
            ["xdotool", "getwindowfocus", "getwindowname"], text=True, stderr=subprocess.DEVNULL
        )
    except subprocess.CalledProcessError:
        return False
    return text in out


@evaluator(env_name="ubuntu")
def check_odt_text(file_path: str, content: str) -> bool:
    """Whether the OpenDocument text at `file_path` contains the paragraph `content`."""
    from odf import teletype, text
    from odf.opendocument import load

    if not os.path.isfile(file_path):
        return False
    document = load(file_path)
    return any(content in teletype.extractText(p) for p in document.getElementsByType(text.P))


@evaluator(env_name="ubuntu")
def check_image_format(file_path: str, image_format: str) -> bool:
    """Whether `file_path` is an image file in `image_format` (e.g. "PNG") that decodes."""
    from PIL import Image

    if not os.path.isfile(file_path):
        return False
    try:
        with Image.open(file_path) as image:
            image.load()
            return image.format == image_format
    except OSError:
        return False
