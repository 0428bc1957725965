"""The one exception hierarchy of crabray.

Every error a user can see is a ``CrabrayError`` with a message that says what
went wrong and what to do. Lower-level errors (pydantic, docker, paramiko, Ray)
are translated at the boundary with ``raise ... from exc``.

::

    CrabrayError
    ├── ConfigError              bad input: a suite, task file, field (names file, field, reason)
    │   ├── SuiteLoadError       a suite that cannot be imported or parsed
    │   ├── UnknownNameError     a registry has no entry of that name (lists the known ones)
    │   ├── MissingDependencyError  a registered entry needs a package that is not installed
    │   ├── DuplicateNameError   two different objects claim one name in a registry
    │   └── HostError            this host cannot make the sandboxes a run needs (bubblewrap
    │                            missing, an engine that does not answer, an image not there):
    │                            found before the first episode, or by an episode; the run stops
    ├── ActionError              an action that cannot be built, combined or called
    │   └── ActionParameterError bad parameters for an action call (names action, parameter)
    ├── EvaluatorError           an evaluator that raised or returned a non-bool
    ├── GraphError               an invalid evaluator graph (cycle, several sinks, empty)
    ├── SandboxError             a sandbox (backend) failed: infrastructure, retried
    │   ├── SandboxBrokenError   it failed of what was done inside it (its guest killed, its
    │   │                        memory exhausted): the agent's failure, never retried
    │   ├── SandboxTimeoutError  a sandbox operation outlived its timeout
    │   ├── PlacementError       the cluster could not give an episode all its sandboxes'
    │   │                        slots (in time, or ever): infrastructure
    │   └── SandboxConfigError   a sandbox cannot be made as configured (an image that does
    │       │                    not exist): deterministic, a setup error, never retried
    │       └── SandboxHostError a tool or image every sandbox of its kind needs is missing on
    │                            this host: no episode there can start, so the run stops
    ├── SandboxFileError         a file operation was refused or the file is missing:
    │   │                        the caller's mistake, a result, never retried
    │   └── FileTooLargeError    a file is larger than its reader's cap: never read at all
    ├── AgentError               the agent itself failed (not a bad action call)
    │   ├── NoSolutionError      the oracle was asked to replay a task without a solution:
    │   │                        the benchmark's error, not the agent's
    │   └── ModelAPIError        the model API failed a request (after any retries)
    │       ├── ModelUnreachableError  no answer (connection, 5xx, 429) after the client's
    │       │                    retries: infrastructure, not the model's output
    │       └── AuthenticationError  the API refused the credentials (401/403): never retried
    └── ResultsError             the results dataset cannot be read or written
"""

from __future__ import annotations


class CrabrayError(Exception):
    """Base class of every error crabray raises on purpose."""


class ConfigError(CrabrayError):
    """Bad input: names the file, the field and the reason.

    Args:
        reason: What is wrong and, where possible, how to fix it.
        file: The file the bad input came from, if any.
        field: The dotted path of the offending field, if any.
    """

    def __init__(self, reason: str, *, file: str | None = None, field: str | None = None) -> None:
        self.reason = reason
        self.file = file
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = ": ".join(part for part in (self.file, self.field) if part)
        return f"{where}: {self.reason}" if where else self.reason


class HostError(ConfigError):
    """This host (or a node of the cluster) cannot make the sandboxes a run needs.

    Found by the preflight before the first episode (``crabray.run.preflight``),
    or by an episode whose sandbox failed with a ``SandboxHostError``; either way
    the run stops (exit 2) and the message says what to install or fix.
    """


class SuiteLoadError(ConfigError):
    """A suite file that cannot be imported or parsed."""


class UnknownNameError(ConfigError):
    """A registry (backends, agents, formats, task functions) has no entry of that name.

    Args:
        reason: The message; it lists the known names.
        name: The name asked for.
        known: Every name the registry knows, sorted.
        field: The option or field that named it, if any.
    """

    def __init__(
        self, reason: str, *, name: str, known: list[str], field: str | None = None
    ) -> None:
        self.name = name
        self.known = known
        super().__init__(reason, field=field)


class MissingDependencyError(ConfigError):
    """A registered entry cannot be imported because a package it needs is not installed.

    Args:
        reason: The message; it names the package and, when known, what to install.
        name: The registry name whose import failed.
        missing: The module that could not be imported.
        install_hint: The command that installs it (``pip install ...``), or empty.
        field: The option or field that named the entry, if any.
    """

    def __init__(
        self,
        reason: str,
        *,
        name: str,
        missing: str | None,
        install_hint: str = "",
        field: str | None = None,
    ) -> None:
        self.name = name
        self.missing = missing
        self.install_hint = install_hint
        super().__init__(reason, field=field)


class DuplicateNameError(ConfigError):
    """Two different objects were registered under one name of one registry."""


class ActionError(CrabrayError):
    """An action that cannot be built, combined or run."""


class ActionParameterError(ActionError):
    """An action was called with parameters that do not validate.

    Args:
        action: The action's name.
        problems: One ``(parameter, message)`` pair per problem.
    """

    def __init__(self, action: str, problems: list[tuple[str, str]]) -> None:
        self.action = action
        self.problems = problems
        detail = "; ".join(f"parameter '{param}': {msg}" for param, msg in problems)
        super().__init__(f"action '{action}' got bad parameters: {detail}")


class EvaluatorError(CrabrayError):
    """An evaluator raised, or returned something other than a bool.

    At run time this is the agent's outcome (score 0, counted): the state the
    agent left can make an evaluator raise, so an error it provoked must not
    take the episode out of its denominator.
    """


class EvaluatorFaultError(EvaluatorError):
    """An evaluator or scorer at fault whatever the agent did: the benchmark's.

    Raised when the task binds arguments it refuses or leaves one open, and
    when it raises on a state no agent under test made: the reference
    solution's (the oracle) or setup's own (no action of the agent ran).
    """


class GraphError(CrabrayError):
    """An evaluator graph that cannot be evaluated: empty, cyclic, or with several sinks."""


class SandboxError(CrabrayError):
    """A sandbox failed to start, reset, run a command or move a file.

    This is an infrastructure failure: the episode is retried on a fresh
    environment, never counted against the agent.
    """


class SandboxBrokenError(SandboxError):
    """A sandbox stopped working because of something done inside it, not around it.

    The rule of who caused a sandbox failure is decided where it arises: the
    backend raises this only after seeing the sandbox itself still there (its
    holder, container or connection alive) while what runs inside it is not
    (the guest killed by ``kill -9 -1``, the OOM killer of the sandbox's own
    memory limit). The agent did it, so the episode ends as its failure
    (``sandbox_error``): counted in every denominator, never retried. A
    failure outside the sandbox (the engine unreachable, the node lost, the
    host's disk full) stays a plain :class:`SandboxError`: infrastructure.

    Args:
        message: What broke, and where it arose.
    """


class SandboxConfigError(SandboxError):
    """A sandbox cannot be made as it is configured (a base image that does not exist here).

    Deterministic: trying again fails the same way, so the episode ends as a
    ``setup_error`` and is not retried. The message names the option that fixes it.
    """


class SandboxHostError(SandboxConfigError):
    """This host lacks what every sandbox of the kind needs (``bwrap``, an image, QEMU).

    Raised by a backend when a sandbox cannot start for a reason no other task
    or attempt on this host would avoid. The episode is recorded as a
    ``setup_error`` and the run stops with a ``HostError`` carrying the message
    (which says how to fix the host), instead of failing every episode the same way.
    """


class SandboxTimeoutError(SandboxError):
    """A sandbox operation outlived its timeout."""


class PlacementError(SandboxError):
    """The cluster could not place every sandbox an episode needs.

    Either not within the scheduler's ``placement_timeout_sec`` (its slots were
    held elsewhere: another run, actors Ray had not released), or never (the task
    needs more sandboxes of a kind than the cluster has slots of it).
    Infrastructure: the episode is recorded as ``env_error``, never as the agent's.
    """


class SandboxFileError(CrabrayError):
    """A file operation was refused (outside the sandbox) or failed (missing file).

    Not a ``SandboxError``: the sandbox works, the request was wrong. When an
    agent's action causes it, it is the agent's action error.
    """


class FileTooLargeError(SandboxFileError):
    """A file is larger than the most its reader takes; nothing of it was read.

    The size is the one of the file that was opened, checked before a byte of it
    crosses to the host, so no path spelling (``a/../big``) can make the check and
    the read see different files.

    Args:
        message: What was refused.
        size: The file's size in bytes.
        limit: The most the reader takes.
    """

    def __init__(self, message: str, *, size: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class AgentError(CrabrayError):
    """The agent failed to produce a step (its own fault, not the environment's)."""


class ModelAPIError(AgentError):
    """The model's API failed a request: a client error, or retries exhausted.

    An agent failure, recorded as the episode's ``agent_error``; the message
    carries the server's own explanation and never the API key.

    Args:
        message: What failed, with the server's message.
        status: The HTTP status, when the server answered.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ModelUnreachableError(ModelAPIError):
    """The model's API gave no usable answer after the client's retries.

    The connection failed, or the server kept answering 5xx or 429: an outage,
    not the model's output. The episode is attributed to the infrastructure
    (``crabray.core.result.attribution_of``), so the agent is not scored on it.
    """


class AuthenticationError(ModelAPIError):
    """The model's API refused the credentials (HTTP 401 or 403), or no key was available.

    Never retried: a wrong or missing key does not fix itself.
    """


class NoSolutionError(AgentError):
    """A scripted agent that replays the reference solution met a task without one.

    The suite's fault, not the agent's: the episode is a benchmark error
    (``crabray.core.result.attribution_of``), never counted as the agent's result.
    """


class ResultsError(CrabrayError):
    """The results dataset cannot be read or written."""
