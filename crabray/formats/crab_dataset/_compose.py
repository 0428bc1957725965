"""One composed task: a CRAB task JSON over the dataset's ``SubTask`` templates.

The graph is built as CRAB's ``TaskGenerator.get_task_from_file`` builds it:

- each entry of ``tasks`` is a subtask instance; its evaluator graph is
  ``evaluator_generator(**attribute)``; ``output`` is kept, not evaluated (the
  next subtask's attribute already carries the value);
- ``adjlist`` is read by ``networkx.parse_adjlist`` with integer nodes, the
  indices into ``tasks``; the task's graph is the union of the subtask graphs,
  plus, for each adjlist edge (u, v), an edge from every sink of u's graph to
  every source of v's. The adjlist is read as directed (``u v`` means u before
  v), as CRAB's generator writes it; CRAB reads it back undirected, which gives
  the same graph for every chain (all of crab-benchmark-v0's files) but would
  turn an edge of a join (``0 2`` / ``1 2``) around;
- ``description`` is the instruction as written (attributes were filled in when
  the file was generated), ``id`` the task id;
- setup, teardown and extra actions are those of every subtask, each once.

Where CRAB would fail late or quietly (an unknown subtask, a missing attribute,
an index absent from the adjlist), crabray reports the file, field and line.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from crabray.core import ROOT_ENV, Action, Evaluator, SubTask, Task, evaluator
from crabray.core.env import Env
from crabray.core.errors import ConfigError, GraphError
from crabray.core.graph import GraphEvaluator
from crabray.core.task_generator import compose_evaluators, parse_order, unique_actions
from crabray.formats.crab_dataset._missing import MissingModuleError, missing_modules
from crabray.formats.steps import closed_action
from crabray.formats.suite import SuiteErrors

if TYPE_CHECKING:
    import networkx as nx

_COLON = re.compile(r"\s*:")


class SubTaskUse(BaseModel):
    """An entry of ``tasks``: which subtask, with which attribute values."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, description="The id of a SubTask of the dataset's modules.")
    attribute: dict[str, Any] = Field(description="The subtask's attribute values.")
    output: Any = Field(default=None, description="What the subtask produced (kept, unused).")


class SolutionStep(BaseModel):
    """crabray's extra field: a step of the reference solution the oracle agent replays."""

    model_config = ConfigDict(extra="forbid")

    action: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    env: str | None = Field(default=None, description="The environment it runs in, if several.")


class ComposedTaskDocument(BaseModel):
    """A task file of a CRAB composed-task dataset. Unknown fields go to the task's metadata."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    description: str = Field(min_length=1)
    tasks: list[SubTaskUse] = Field(min_length=1)
    adjlist: str
    solution: list[SolutionStep] = Field(default_factory=list)


@dataclass
class Subtasks:
    """The ``SubTask`` templates of a dataset's modules, by id, with the file defining each."""

    by_id: dict[str, SubTask] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    broken_modules: list[str] = field(default_factory=list)


@dataclass
class Composed:
    """A task file, turned into a ``Task`` (its solution is resolved by the loader)."""

    task: Task
    file: Path
    solution: list[SolutionStep]
    lines: dict[str, int]
    env_names: set[str]


@evaluator(local=True)
def cannot_run_here() -> bool:
    """Stands for the graph of a task whose subtask could not make it on this machine."""
    return False


def compose(file: Path, subtasks: Subtasks) -> Composed:
    """Read a task file and build its ``Task``.

    Raises:
        SuiteErrors: Every problem of the file, each with its line and field.
    """
    text, raw = _read(file)
    lines = json_lines(text)
    problems: list[tuple[str, str]] = []
    try:
        doc = ComposedTaskDocument.model_validate(raw)
    except ValidationError as exc:
        problems = [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
        raise _errors(file, lines, problems) from exc
    builder = _Builder(file, doc, subtasks)
    task = builder.build()
    if builder.problems or task is None:
        raise _errors(file, lines, builder.problems)
    return Composed(task, file, doc.solution, lines, builder.env_names)


def _read(file: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = file.read_text(encoding="utf-8")
        raw = json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(file)) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            file=f"{file}:{exc.lineno}",
        ) from exc
    except RecursionError as exc:
        raise ConfigError("is nested too deeply to read", file=str(file)) from exc
    if not isinstance(raw, dict):
        raise ConfigError("must hold a JSON object (a composed task)", file=str(file))
    return text, raw


def _errors(file: Path, lines: dict[str, int], problems: list[tuple[str, str]]) -> SuiteErrors:
    return SuiteErrors(
        str(file), [ConfigError(m, file=where(file, lines, f), field=f) for f, m in problems]
    )


def where(file: Path, lines: dict[str, int], dotted: str) -> str:
    """``file:line`` of the field ``dotted`` (or of its nearest enclosing field)."""
    parts = dotted.split(".")
    for size in range(len(parts), 0, -1):
        line = lines.get(".".join(parts[:size]))
        if line is not None:
            return f"{file}:{line}"
    return str(file)


def json_lines(text: str) -> dict[str, int]:
    """The line of each top-level key, of each element of a top-level array (``tasks.0``) and of
    each key of such an element (``tasks.0.attribute``)."""
    lines: dict[str, int] = {}
    depth, line, index = 0, 1, 0
    key: str | None = None
    element: str | None = None
    counts: dict[str, int] = {}
    while index < len(text):
        char = text[index]
        if char == "\n":
            line += 1
        elif char == '"':
            end = _string_end(text, index)
            if depth in (1, 3) and _COLON.match(text, end + 1):
                name = json.loads(text[index : end + 1])
                if depth == 1:
                    key = name
                    lines.setdefault(name, line)
                elif element is not None:
                    lines.setdefault(f"{element}.{name}", line)
            line += text.count("\n", index, end)
            index = end
        elif char in "[{":
            if depth == 2 and key is not None:
                position = counts.get(key, 0)
                element = f"{key}.{position}"
                lines[element] = line
                counts[key] = position + 1
            depth += 1
        elif char in "]}":
            depth -= 1
        index += 1
    return lines


def _string_end(text: str, start: int) -> int:
    index = start + 1
    while index < len(text) and text[index] != '"':
        index += 2 if text[index] == "\\" else 1
    return index


class _Builder:
    """Builds the task of one document, collecting (field, problem) pairs."""

    def __init__(self, file: Path, doc: ComposedTaskDocument, subtasks: Subtasks) -> None:
        self.file, self.doc, self.subtasks = file, doc, subtasks
        self.problems: list[tuple[str, str]] = []
        self.unavailable: list[str] = []
        self.env_names: set[str] = set()

    def build(self) -> Task | None:
        uses = [self._subtask(i, use) for i, use in enumerate(self.doc.tasks)]
        order = self._adjlist()
        if self.problems or order is None:
            return None
        graphs = {i: self._graph(i, uses[i]) for i in order.nodes}
        if self.problems:
            return None
        chosen = [uses[i] for i in order.nodes]
        actions = unique_actions(
            a for s in chosen if s is not None for a in (*s.setup, *s.teardown, *s.extra_action)
        )
        nodes = [a for g in graphs.values() if g is not None for a in g.nodes]
        for act in [*nodes, *actions]:  # known first: a refused task may be unsupported
            if act.env_name and act.env_name != ROOT_ENV:
                self.env_names.add(act.env_name)
        self._needs(chosen, graphs)
        if self.unavailable:
            return self._refused()
        combined = self._combine(order, graphs)
        if combined is None:
            return None
        return self._task(combined, chosen)

    def _subtask(self, index: int, use: SubTaskUse) -> SubTask | None:
        found = self.subtasks.by_id.get(use.task)
        if found is None:
            known = ", ".join(sorted(self.subtasks.by_id)[:8]) or "none"
            hint = (
                f"; these modules failed to import: {', '.join(self.subtasks.broken_modules)}"
                if self.subtasks.broken_modules
                else ""
            )
            self.problems.append(
                (
                    f"tasks.{index}.task",
                    f"unknown subtask '{use.task}'; the dataset's modules define: {known}{hint}",
                )
            )
            return None
        takes = list(found.attribute_dict)
        missing = [k for k in takes if k not in use.attribute]
        unknown = [k for k in use.attribute if k not in found.attribute_dict]
        for name in missing:
            self.problems.append(
                (
                    f"tasks.{index}.attribute",
                    f"missing attribute '{name}' of subtask '{use.task}' (it takes {takes})",
                )
            )
        for name in unknown:
            self.problems.append(
                (
                    f"tasks.{index}.attribute.{name}",
                    f"subtask '{use.task}' has no attribute '{name}' (it takes {takes})",
                )
            )
        if found.evaluator_generator is None:
            self.problems.append(
                (f"tasks.{index}.task", f"subtask '{use.task}' has no evaluator_generator")
            )
        elif not missing and not unknown:
            try:
                inspect.signature(found.evaluator_generator).bind(**use.attribute)
            except TypeError as exc:
                self.problems.append(
                    (
                        f"tasks.{index}.attribute",
                        f"the evaluator_generator of subtask '{use.task}' does not take "
                        f"these attributes: {exc}",
                    )
                )
            except ValueError:
                pass  # no signature to check (a builtin): calling it will tell
        return found

    def _adjlist(self) -> nx.DiGraph[int] | None:
        import networkx as nx  # loaded by composed tasks only

        try:
            graph = parse_order(self.doc.adjlist)
        except (TypeError, ValueError) as exc:
            self.problems.append(
                ("adjlist", f"is not an adjacency list of task indices ('0 1\\n1'): {exc}")
            )
            return None
        size = len(self.doc.tasks)
        strangers = sorted(n for n in graph.nodes if not 0 <= n < size)
        if strangers:
            self.problems.append(
                (
                    "adjlist",
                    f"names {strangers}, but 'tasks' has {size} entries (indices 0 to {size - 1})",
                )
            )
        for index in range(size):
            if index not in graph.nodes:
                self.problems.append(
                    (
                        f"tasks.{index}",
                        f"is not in the adjlist, so the task would leave it out; add the "
                        f"line '{index}' (or an edge to it) to 'adjlist'",
                    )
                )
        if not nx.is_directed_acyclic_graph(graph):
            self.problems.append(("adjlist", "has a cycle: a subtask cannot follow itself"))
        return None if self.problems else graph

    def _graph(self, index: int, subtask: SubTask | None) -> nx.DiGraph[Evaluator] | None:
        import networkx as nx  # loaded by composed tasks only

        if subtask is None or subtask.evaluator_generator is None:
            return None
        use = self.doc.tasks[index]
        try:
            made = subtask.evaluator_generator(**use.attribute)
        except MissingModuleError as exc:
            self.unavailable.append(f"subtask '{use.task}' (making its evaluators) {exc.reason}")
            return None
        except Exception as exc:
            self.problems.append(
                (
                    f"tasks.{index}.attribute",
                    f"the evaluator_generator of subtask '{use.task}' raised "
                    f"{type(exc).__name__}: {exc}",
                )
            )
            return None
        if isinstance(made, Evaluator):
            single: nx.DiGraph[Evaluator] = nx.DiGraph()
            single.add_node(made)
            return single
        if not isinstance(made, nx.DiGraph):
            self.problems.append(
                (
                    f"tasks.{index}.task",
                    f"the evaluator_generator of subtask '{use.task}' returned "
                    f"{type(made).__name__}, not a networkx DiGraph of evaluators "
                    "(nx.path_graph([...], create_using=nx.DiGraph))",
                )
            )
            return None
        return made

    def _needs(
        self, chosen: list[SubTask | None], graphs: dict[int, nx.DiGraph[Evaluator] | None]
    ) -> None:
        """Record each action that runs in the episode but reaches a missing module."""
        for index, subtask in zip(graphs, chosen, strict=True):
            graph = graphs[index]
            if subtask is None:
                continue
            acts: list[Action] = [*(graph.nodes if graph is not None else [])]
            acts += [*subtask.setup, *subtask.teardown, *subtask.extra_action]
            for act in acts:
                if act.runs_in_sandbox:
                    continue  # its imports resolve in the sandbox
                for module, importer in missing_modules(act).items():
                    self.unavailable.append(
                        f"subtask '{subtask.id}' ({self.subtasks.origin.get(subtask.id, '?')}): "
                        f"'{act.name}' runs in the episode and needs the Python module "
                        f"'{module}' (imported by {importer}), which is not installed here"
                    )

    def _combine(
        self, order: nx.DiGraph[int], graphs: dict[int, nx.DiGraph[Evaluator] | None]
    ) -> GraphEvaluator | None:
        import networkx as nx  # loaded by composed tasks only

        if any(g is None for g in graphs.values()):
            return None  # reported already
        keys = list(graphs)
        position = {key: i for i, key in enumerate(keys)}
        try:
            combined = compose_evaluators(
                [graphs[k] for k in keys],  # type: ignore[misc]
                [(position[u], position[v]) for u, v in order.edges],
            )
        except nx.NetworkXError as exc:
            self.problems.append(("tasks", f"the subtasks' evaluator graphs overlap: {exc}"))
            return None
        try:
            return GraphEvaluator(combined)
        except GraphError as exc:
            self.problems.append(("adjlist", f"the composed evaluator graph is invalid: {exc}"))
            return None

    def _task(self, graph: GraphEvaluator, chosen: list[SubTask | None]) -> Task | None:
        subtasks = [s for s in chosen if s is not None]
        extra = set(self.doc.model_extra or {})
        try:
            return Task(
                id=self.doc.id,
                description=self.doc.description,
                evaluator=graph,
                setup=unique_actions(a for s in subtasks for a in s.setup),
                teardown=unique_actions(a for s in subtasks for a in s.teardown),
                extra_actions=unique_actions(a for s in subtasks for a in s.extra_action),
                metadata=self._metadata(extra),
            )
        except ValidationError as exc:
            self.problems += [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
            return None

    def _metadata(self, extra: set[str]) -> dict[str, Any]:
        doc = self.doc
        return {
            "format": "crab-dataset",
            "file": str(self.file),
            "subtasks": [u.task for u in doc.tasks],
            "attributes": [u.attribute for u in doc.tasks],
            "outputs": [u.output for u in doc.tasks],
            "adjlist": doc.adjlist,
            **{k: (doc.model_extra or {})[k] for k in sorted(extra)},
        }

    def _refused(self) -> Task:
        """The task, failing at setup with why it cannot run on this machine."""
        reason = "; ".join(dict.fromkeys(self.unavailable))
        message = f"task '{self.doc.id}' cannot run here: {reason}"

        def refuse(env: Env) -> None:
            raise MissingModuleError(message, file=str(self.file))

        return Task(
            id=self.doc.id,
            description=self.doc.description,
            evaluator=cannot_run_here,
            setup=[closed_action("missing_module", message, refuse, local=True)],
            metadata={**self._metadata(set()), "warnings": [message]},
        )
