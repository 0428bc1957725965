"""``Suite``: the loaded, validated tasks of a suite, whatever format they came in.

Every format loader produces a ``Suite``: ordinary ``BenchmarkConfig`` and
``Task`` objects keyed by task id. What crosses to the workers is only a
``SuiteRef`` (path and format); each worker loads the suite itself, once.

Several benchmarks of one suite run side by side. A task id that two of them
declare (CRAB's template declares task "0" in two benchmarks) is qualified by
benchmark name in both, ``<benchmark>/<id>``, and that is its id in the run's
results; ids declared once are kept as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from crabray.core import BenchmarkConfig, Task
from crabray.core.errors import ConfigError
from crabray.core.result import EpisodeRecord
from crabray.core.words import counted


class SuiteRef(BaseModel):
    """Where a suite lives and in which format: enough for a worker to load it."""

    path: str
    format: str
    backend: str | None = Field(
        default=None,
        description="Sandbox backend of formats that name none (task-JSON, task folders), or "
        "the one replacing a python suite's environments' own.",
    )
    backend_settings: dict[str, Any] | None = Field(
        default=None,
        description="Python suites: settings replacing (on another backend) or updating (on "
        "theirs) every environment's backend settings.",
    )
    index: str | None = Field(
        default=None, description="Task-JSON: an index file selecting a subset of the tasks."
    )
    base_image: str | None = Field(
        default=None,
        description="Task folders: the image that replaces every FROM of the tasks' Dockerfiles.",
    )
    services: str | None = Field(
        default=None,
        description="Task folders: the service registry file (services.yml at the root if unset).",
    )


BENCHMARK_QUALIFIER = "/"
"""Joins a benchmark's name and a task id that several benchmarks of a suite declare."""


@dataclass(frozen=True)
class SuiteEntry:
    """One task together with the benchmark that gives it environments and limits."""

    benchmark: BenchmarkConfig
    task: Task


RecordFiles = Callable[[SuiteEntry, EpisodeRecord], dict[str, bytes]]
"""Files a format writes for a finished episode, by path relative to the output directory."""


@dataclass
class Suite:
    """A loaded suite: its tasks by id, in declaration order.

    ``record_files``, when a format sets it, is called by the driver for every
    finished episode; the files it returns are written with the episode's
    artifacts (task-JSON's ``summary.json``). Workers never call it.
    """

    ref: SuiteRef
    name: str
    entries: dict[str, SuiteEntry] = field(default_factory=dict)
    record_files: RecordFiles | None = None
    unsupported: dict[str, str] = field(default_factory=dict)
    """Tasks the suite declares that this installation cannot run, by id, with the reason
    (crab-benchmark-v0's Android tasks): listed and skipped, never run."""

    shared_ids: set[str] = field(default_factory=set)

    def add(self, benchmark: BenchmarkConfig, source: str) -> None:
        """Add every task of ``benchmark``; ids another benchmark declares too are
        qualified by benchmark name in both.

        Raises:
            ConfigError: Two benchmarks of the same name declare the same task id.
        """
        for task in benchmark.tasks:
            if task.id in self.entries:
                self._qualify(task.id, benchmark, source)
            if task.id in self.shared_ids:
                key = f"{benchmark.name}{BENCHMARK_QUALIFIER}{task.id}"
                if key in self.entries:
                    raise ConfigError(
                        f"task id '{task.id}' is declared twice by benchmarks named "
                        f"'{benchmark.name}'; rename one benchmark or one task",
                        file=source,
                    )
                self.entries[key] = SuiteEntry(benchmark, task.model_copy(update={"id": key}))
            else:
                self.entries[task.id] = SuiteEntry(benchmark, task)

    def _qualify(self, task_id: str, newcomer: BenchmarkConfig, source: str) -> None:
        """Re-key the task ``task_id`` already present as ``<its benchmark>/<id>``, in place."""
        first = self.entries[task_id]
        if first.benchmark.name == newcomer.name:
            raise ConfigError(
                f"task id '{task_id}' is declared twice by benchmarks named '{newcomer.name}'; "
                "rename one benchmark or one task",
                file=source,
            )
        key = f"{first.benchmark.name}{BENCHMARK_QUALIFIER}{task_id}"
        moved = SuiteEntry(first.benchmark, first.task.model_copy(update={"id": key}))
        self.entries = {
            (key if k == task_id else k): (moved if k == task_id else v)
            for k, v in self.entries.items()
        }
        self.shared_ids.add(task_id)

    def unsupported_reasons(self) -> list[str]:
        """The unsupported tasks, one line per reason: how many, the first few, why."""
        return self.reasons(self.unsupported)

    @staticmethod
    def reasons(unsupported: dict[str, str]) -> list[str]:
        by_reason: dict[str, list[str]] = {}
        for task_id, reason in unsupported.items():
            by_reason.setdefault(reason, []).append(task_id)
        return [
            f"{len(ids)} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}): {reason}"
            for reason, ids in by_reason.items()
        ]

    @property
    def task_ids(self) -> list[str]:
        return list(self.entries)

    def entry(self, task_id: str) -> SuiteEntry:
        """The task called ``task_id``.

        Raises:
            ConfigError: The suite has no such task, or cannot run it here.
        """
        if task_id in self.unsupported:
            raise ConfigError(
                f"task '{task_id}' of suite '{self.name}' cannot run here: "
                f"{self.unsupported[task_id]}",
                file=self.ref.path,
            )
        try:
            return self.entries[task_id]
        except KeyError:
            raise ConfigError(
                f"no task '{task_id}' in suite '{self.name}'", file=self.ref.path
            ) from None


class SuiteErrors(ConfigError):
    """Every problem found while loading a suite, each naming file and field."""

    def __init__(self, path: str, errors: list[ConfigError], partial: Suite | None = None) -> None:
        self.errors = errors
        # The tasks that did load when other files did not: they can still be checked.
        self.partial = partial
        lines = "\n".join(f"  - {e}" for e in errors)
        super().__init__(f"{counted(len(errors), 'problem')} in suite:\n{lines}", file=path)


def suite_name(path: Path) -> str:
    """The default name of a suite: its file stem or folder name."""
    return path.stem if path.is_file() else path.name
