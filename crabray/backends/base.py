"""The backend interface: one narrow seam that every sandbox implements.

Action libraries are written only against ``Backend``; a task runs unchanged on
any backend that has what its actions need. Each method's docstring states
what it raises, and every backend honours that contract (``tests/backends``
checks each one against the real thing).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field

from crabray.backends.settings import BackendSettings, parse_settings
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import FileTooLargeError, SandboxError

RUN_ID_VAR = "CRABRAY_RUN_ID"
"""Environment variable holding the run a sandbox serves: the scheduler sets it on
every environment actor, and backends label what they make with it (docker:
the ``crabray.run`` label)."""


MAX_OUTPUT_BYTES = 10 * 1024 * 1024
"""The most of one stream (stdout, stderr) of one ``exec`` that is kept: 10 MiB.

Every backend reads a command's output incrementally and drops what comes
past this, so a command that prints without end costs bounded memory; the
kept part ends with :data:`OUTPUT_CUT_MARKER`."""

OUTPUT_CUT_MARKER = "\n[crabray: output cut at 10 MiB]\n"
"""Appended to a stream that was cut at :data:`MAX_OUTPUT_BYTES`."""

MAX_FILE_BYTES = 64 * 1024 * 1024
"""The most ``get_file`` reads of one file when its caller names no smaller cap: 64 MiB.

Whatever the sandbox holds (a sparse file of terabytes costs it nothing), the
worker's memory stays bounded: a larger file is refused with
:class:`~crabray.core.errors.FileTooLargeError` before any of it is read."""


def check_file_size(path: str, size: int, max_bytes: int | None) -> None:
    """Refuse a file of ``size`` bytes past ``max_bytes`` (``MAX_FILE_BYTES`` when None).

    Every backend calls it with the size of the file it opened (or is about to
    stream), never of a path looked up separately.

    Raises:
        FileTooLargeError: The file is larger than the cap.
    """
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    if size > limit:
        raise FileTooLargeError(
            f"cannot read '{path}': it holds {size} bytes, more than the {limit} bytes "
            "a read takes; nothing of it was read",
            size=size,
            limit=limit,
        )


def output_text(data: bytes, cut: bool) -> str:
    """A stream's kept bytes as text, with the marker when the rest was dropped."""
    text = data.decode("utf-8", errors="replace")
    return text + OUTPUT_CUT_MARKER if cut else text


H = TypeVar("H")


class PythonCall(BaseModel):
    """A plain-Python action to run inside the sandbox: its source and its arguments, as text.

    Built by the episode (:func:`crabray.backends.guest.python_call`); never
    bytecode or pickles, so host and guest Python versions may differ.
    """

    action: str = Field(description="The action's name, for messages.")
    function: str = Field(description="The name the function is defined under in the units.")
    units: list[tuple[str, int, str]] = Field(
        description="(file name, first line, source text), compiled in order in the guest."
    )
    arguments_json: str = Field(description="The validated arguments, as a JSON object.")


class Frozen(BaseModel):
    """What :meth:`Backend.freeze_agent` did: the agent's processes stopped, or why not all."""

    frozen: int = Field(default=0, description="Processes of the agent's that were stopped.")
    unverified: str | None = Field(
        default=None,
        description="Why a grade taken now is not verified (a process still running, a "
        "backend that cannot freeze); None when nothing of the agent's runs.",
    )


class ExecResult(BaseModel):
    """What running a command in a sandbox gave."""

    exit_code: int = Field(description="The command's exit status; -1 when it was killed.")
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = Field(default=False, description="True when the timeout killed it.")
    duration_sec: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its timeout."""
        return self.exit_code == 0 and not self.timed_out


class Backend(ABC):
    """A sandbox: a clean place where an agent's actions run.

    Lifecycle: ``start()`` once, then any number of ``reset()`` between
    episodes, then ``close()``. All paths are sandbox paths (absolute, or
    relative to the sandbox's working directory).

    The lifecycle's states and its errors live here, once for every backend:
    ``start``, ``reset`` and ``close`` refuse what the state forbids (a second
    start, a reset before start, a start after close; a second close does
    nothing) and call the hooks a backend implements (:meth:`_start`,
    :meth:`_reset`, :meth:`_close`). Its other operations call
    :meth:`_require_started` (or :meth:`_started`) first, which raise the same
    errors for every backend.

    Args:
        config: The environment this sandbox serves; ``config.backend_settings``
            holds the backend's own options.
    """

    kind: ClassVar[str]
    """The backend's kind: the name environments ask for it by (``local``, ``docker``, ...).

    Declared once, on the class; the registry files the class under it
    (:func:`crabray.backends.register_backend`) and node placement counts
    slots by it (:mod:`crabray.cluster.runtime.placement`)."""

    settings_model: ClassVar[type[BackendSettings] | None] = None
    """The model of the backend's ``backend_settings``; ``None`` accepts any settings.

    The one place a backend states its settings: :meth:`check_settings` validates
    against it before a run, and ``__init__`` parses ``config.backend_settings``
    with it into :attr:`settings`. A subclass names its model here and narrows
    the attribute's type (``settings: LocalSettings``)."""

    reset_in_call: ClassVar[bool] = False
    """Whether an episode queued behind another resets the sandbox in its own actor call.

    True where ``reset`` is cheap enough to count against the episode's time
    limit (it swaps in a spare built ahead); a slow reset (a VM's revert)
    stays a call of its own, so the next episode's limit starts after it."""

    default_memory_mb: ClassVar[int] = 512
    """The memory (MiB) a sandbox is taken to need when its settings set no ``memory_mb``.

    With ``--concurrency auto`` each environment actor takes its sandbox's memory as
    Ray's ``memory`` resource, so a node is never given more sandboxes than its memory
    holds (:func:`crabray.cluster.runtime.placement.sandbox_memory_mb`). A backend with
    a memory limit of its own says its settings' default here (docker: a container's
    limit; vm: a guest's memory); 512 MiB for one that says nothing."""

    uses_node_memory: ClassVar[bool] = True
    """Whether the sandbox lives on the node of its actor, and so takes that node's memory.

    False where it lives on another machine (ssh): its actor then takes no memory
    resource, whatever its settings say."""

    @classmethod
    def reaches_worker(cls, settings: dict[str, Any]) -> bool:
        """Whether what runs in a sandbox with ``settings`` can signal the worker process
        running its episode (the host's user, in the host's process namespace).

        Read on the driver when an episode's worker died on a live node: the death is
        then the episode's own (a final ``sandbox_error``) only if one of its sandboxes
        could have killed it; else it was killed from outside and the episode is retried
        (:func:`crabray.cluster.actors.episode_call.died_result`). A method, not an
        attribute, because it may depend on the settings (local: ``isolation: none``).
        The default: a confined sandbox cannot.
        """
        return False

    settings: BackendSettings | None
    """The parsed ``backend_settings`` (``None`` for a backend without a ``settings_model``)."""

    def __init__(self, config: EnvironmentConfig, settings: BackendSettings | None = None) -> None:
        """Keep ``config`` and parse its ``backend_settings``, unless ``settings`` are given.

        Raises:
            ConfigError: ``backend_settings`` do not validate against ``settings_model``.
        """
        self.config = config
        if settings is None and self.settings_model is not None:
            settings = parse_settings(self.settings_model, config.backend_settings, self.kind)
        self.settings = settings
        self._state: Literal["new", "started", "closed"] = "new"
        self._lifecycle = threading.RLock()
        """Held through a start, a reset and a close: a close from another thread waits
        for the start or reset under way, so nothing it makes is left behind."""

    @property
    def started(self) -> bool:
        """Whether ``start()`` succeeded and ``close()`` has not been called since."""
        return self._state == "started"

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called: the sandbox cannot be used or started again."""
        return self._state == "closed"

    def start(self) -> None:
        """Create the sandbox in its clean state.

        A failed start leaves the backend unstarted (unless the backend closed
        itself in the attempt): ``start()`` may be called again.

        Raises:
            SandboxError: The sandbox is already started, is closed, or could not be created.
        """
        with self._lifecycle:
            if self._state == "closed":
                raise SandboxError(f"{self._label} is closed; make a new backend to start again")
            if self._state == "started":
                raise SandboxError(f"{self._label} is already started")
            self._start()
            if self._state == "new":
                self._state = "started"

    def reset(self) -> None:
        """Bring a started sandbox back to exactly its clean state.

        Raises:
            SandboxError: The sandbox is not started, is closed, or could not be
                restored; it must not be reused.
        """
        with self._lifecycle:
            self._require_started("reset")
            self._reset()

    def close(self) -> None:
        """Destroy the sandbox and everything it started; calling it twice is harmless.

        Closing a backend that never started releases what its constructor or a
        failed start left; the backend cannot be started afterwards.
        """
        with self._lifecycle:
            if self._state == "closed":
                return
            self._state = "closed"
            self._close()

    @abstractmethod
    def _start(self) -> None:
        """Create the sandbox; called by :meth:`start` on a new backend only.

        Raises:
            SandboxError: The sandbox could not be created.
        """

    @abstractmethod
    def _reset(self) -> None:
        """Restore the clean state; called by :meth:`reset` on a started backend only.

        Raises:
            SandboxError: The sandbox could not be restored.
        """

    @abstractmethod
    def _close(self) -> None:
        """Destroy what the backend made; called by :meth:`close` once, even unstarted.

        Never raises for what it could not remove: that is logged.
        """

    @property
    def _label(self) -> str:
        """How lifecycle errors name the sandbox: ``local sandbox of 'shell'``."""
        return f"{self.kind} sandbox of '{self.config.name}'"

    def _require_started(self, operation: str) -> None:
        """Refuse ``operation`` unless the sandbox is started and not closed.

        Raises:
            SandboxError: Closed, or not started (saying to call ``start()``).
        """
        if self._state == "closed":
            raise SandboxError(f"cannot {operation}: the {self._label} is closed")
        if self._state != "started":
            raise SandboxError(
                f"cannot {operation}: the {self._label} is not started; call start() first"
            )

    def _started(self, operation: str, handle: H | None) -> H:
        """``handle`` (the backend's root, container, connection ...) once started.

        Raises:
            SandboxError: As :meth:`_require_started`; also when ``handle`` is
                ``None`` (the backend has none yet, as during its own start).
        """
        self._require_started(operation)
        if handle is None:
            raise SandboxError(
                f"cannot {operation}: the {self._label} is not started; call start() first"
            )
        return handle

    @abstractmethod
    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a command inside the sandbox and wait for it.

        A string is run by the sandbox's shell (``sh -c``); a list is run as
        argv. A command that outlives ``timeout_sec`` is killed with its whole
        process tree and the result has ``timed_out=True`` and ``exit_code=-1``;
        a non-zero exit is a result, not an error. Each of stdout and stderr is
        kept up to :data:`MAX_OUTPUT_BYTES`, then cut with :data:`OUTPUT_CUT_MARKER`.

        Raises:
            SandboxError: The sandbox could not run the command at all.
        """

    def call_python(self, call: PythonCall) -> Any:
        """Run a plain-Python action inside the sandbox and return its value.

        Runs in the sandbox's guest process (:mod:`crabray.backends.guest`),
        under the sandbox's ``python3``, in its working directory.

        Raises:
            GuestCallError: The function raised; the message holds the guest's traceback.
            NoPythonError: The sandbox has no ``python3`` (a configuration error).
            SandboxError: The backend cannot run Python (the default), or the guest
                died twice in a row.
        """
        raise SandboxError(
            f"the '{self.kind}' sandbox of '{self.config.name}' cannot run action "
            f"'{call.action}' inside it: this backend has no guest process"
        )

    def agent_begins(self) -> None:
        """The agent is about to act: what ran in the sandbox so far was the harness's.

        Called by the episode after the task's setup, before the agent's first
        step. A backend with a guest trusts the guest running now (or the next
        one it starts) and counts every later start as reachable by the agent.
        """
        return None

    def agent_ends(self) -> None:
        """The agent's turn is over (its processes frozen): note what it changed, once.

        Called by the episode after the freeze at the end of the agent's turn, and
        again after a grade taken with its processes thawed. What costs too much
        to look at after every step (docker: the engine's diff of the container)
        is read here. The default notes nothing.

        Raises:
            SandboxError: The sandbox could not be reached.
        """
        return None

    def grader_distrust(self, *, ran_commands: bool) -> str | None:
        """Why the episode's grading on this sandbox may have gone through what the agent could
        alter; None when it went by a path the agent cannot (a verified grade).

        Args:
            ran_commands: Whether an evaluator ran a command here (a command runs
                programs that the sandbox's own user may be able to replace).

        Returns:
            The reason, as the row's ``grader_untrusted_reason`` says it; the default is
            that the backend cannot tell (see docs/isolation.md, "The grading path").
        """
        return f"the {self.kind} backend cannot tell whether the agent reached its grader"

    def probe_health(self) -> str | None:
        """Why the sandbox itself does not answer, found by touching nothing the agent made.

        Asked after an operation failed in a way that may be the host's: a
        sandbox that answers this probe is healthy, so the failure came from
        what the agent made of it (a socket where a file was expected, a tree
        too deep) and is the agent's, never retried. The default runs ``true``
        and only asks that the sandbox ran it (its exit status is the
        sandbox's own).

        Returns:
            None when the sandbox answers, else what failed.
        """
        try:
            self.exec(["true"], timeout_sec=30)
        except SandboxError as exc:
            return str(exc)
        return None

    def freeze_agent(self) -> Frozen:
        """Stop every process the agent started in the sandbox, before a grader runs.

        Called by the episode around each grading moment (each step's evaluator
        graph, from the end of the agent's turn through the final grading). The
        processes keep the state graders look at (they exist, hold their files
        and windows) but can neither act nor answer; :meth:`thaw_agent` continues
        them while the agent's turn goes on, and the next reset kills them.

        Returns:
            What was stopped, and why a grade taken now is not verified (the
            default: this backend cannot freeze).

        Raises:
            SandboxError: The sandbox could not be reached.
        """
        return Frozen(
            unverified=f"the {self.kind} backend cannot stop the agent's processes while "
            "it is graded"
        )

    def thaw_agent(self) -> None:
        """Continue what :meth:`freeze_agent` stopped (the default stops nothing).

        Raises:
            SandboxError: The sandbox could not be reached.
        """
        return None

    def grader_replaced(self) -> bool:
        """Whether the agent replaced this sandbox's grader: a guest started after its first action.

        Only a backend that grades by a trusted path (``grader_distrust``) can
        tell; there, a guest that had to be started after the agent acted (it
        killed the one started before) runs from what the agent could change,
        and its verdicts are not the grade. False where the backend cannot tell.
        """
        return False

    def check_python(self) -> str:
        """Start the sandbox's guest if needed and return its Python version.

        Raises:
            NoPythonError: The sandbox has no ``python3``.
            SandboxError: The backend has no guest (the default), or it did not start.
        """
        raise SandboxError(
            f"the '{self.kind}' sandbox of '{self.config.name}' cannot run Python actions "
            "inside it: this backend has no guest process"
        )

    @abstractmethod
    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the sandbox, creating parent directories.

        Raises:
            SandboxFileError: The path is outside the sandbox or cannot be written.
        """

    @abstractmethod
    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read the whole file at ``path`` in the sandbox, if it holds at most ``max_bytes``.

        The size checked is the one of the file opened for the read (see
        :func:`check_file_size`); ``max_bytes`` None means :data:`MAX_FILE_BYTES`.

        Raises:
            FileTooLargeError: The file is larger than ``max_bytes``; nothing was read.
            SandboxFileError: The path is outside the sandbox, missing, or not a file.
        """

    def screenshot(self) -> bytes:
        """A PNG of the sandbox's screen.

        Raises:
            SandboxError: The sandbox has no screen (the default).
        """
        raise SandboxError(f"the '{self.kind}' sandbox of '{self.config.name}' has no screen")

    @classmethod
    def check_settings(cls, settings: dict[str, Any]) -> None:
        """Validate ``backend_settings`` without making a sandbox.

        Called on every environment of a suite before a run, so a typo fails
        the run at once instead of every episode's sandbox start. Checks
        ``settings`` against :attr:`settings_model`; accepts anything without one.

        Raises:
            ConfigError: Naming each bad setting.
        """
        if cls.settings_model is not None:
            parse_settings(cls.settings_model, settings, cls.kind)

    @classmethod
    def preflight(cls, settings: dict[str, Any], env_name: str) -> None:
        """Check that this host can start a sandbox with these settings, before a run starts.

        Called once per distinct (backend, settings) a run needs, on a host of the
        kind (:mod:`crabray.run.preflight`), before the first episode, so that a
        missing tool, an engine that does not answer or a missing image stops the
        run at once with its fix, instead of failing every episode. Cheap: it
        asks (is ``bwrap`` usable, does the engine answer, is the image there)
        and makes nothing that outlives the call. The default checks nothing.

        Args:
            settings: The ``backend_settings`` of an environment of this kind.
            env_name: That environment's name, for messages.

        Raises:
            ConfigError: The settings do not validate, or refuse this host (an SSH
                host key that is not known).
            SandboxError: This host cannot start such a sandbox; the message says how
                to fix it.
        """
        return None

    @classmethod
    def cleanup_orphans(cls, settings: dict[str, Any]) -> list[str]:
        """Remove sandboxes of this kind on this host whose owner process is gone.

        Called on every node before a sweep, so sandboxes left behind by a dead
        actor or driver (a killed node, a crashed run) do not pile up. Only
        sandboxes this backend can prove are abandoned are touched.

        Args:
            settings: The ``backend_settings`` of an environment of this kind
                (where its sandboxes live).

        Returns:
            What was removed, one description each, as the run's warning names it
            (``sandbox folder /tmp/crabray-...``, ``container ...``).
        """
        return []

    def describe(self) -> dict[str, Any]:
        """Facts about the sandbox worth recording (host, container id, ...)."""
        return {"kind": self.kind, "env": self.config.name}
