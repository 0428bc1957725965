"""What the site shows, read once from a results dataset: episodes, steps, summaries.

``crabray view`` rebuilds pages on request; ``fingerprint`` tells it cheaply
(from the part files' names, sizes and modification times) whether anything
was written since the last read, so a page load re-reads only after a change.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pandas as pd
import pyarrow as pa

from crabray.core.errors import ResultsError
from crabray.core.result import Attribution
from crabray.results.board._columns import DEFAULT_BY
from crabray.results.board.selection import LATEST_KEY, latest_mask
from crabray.results.store._layout import (
    TABLES,
    check_run_id,
    part_files,
    partition_dir,
    table_root,
)
from crabray.results.store.dataset import read_episodes, read_steps
from crabray.results.store.runs import RunManifest, list_runs, read_manifest

logger = logging.getLogger(__name__)

# The module, not the function ``crabray.results.board.leaderboard`` that shadows its name in
# the package: the site uses what the module offers (``breakdown`` once it exists).
leaderboard_module = importlib.import_module("crabray.results.board.leaderboard")

Fingerprint = tuple[tuple[str, int, int], ...]
"""(path, size, mtime_ns) of every committed part file a site reads."""


MAX_LISTED_EPISODES = 10_000
"""Episodes a site lists and writes pages for, by default: the most recent ones."""


@dataclass(frozen=True)
class RunInfo:
    """A run as the run picker lists it.

    Attributes:
        run_id: The run's id.
        suite: The suite's path as given to ``crabray run`` ("" without a manifest).
        suite_name: The suite's name ("" without a manifest).
        suite_description: What the suite's benchmarks say they measure ("" when they
            do not say).
        created_at: When the run started, as text ("" without a manifest).
        episodes: Episodes recorded so far.
        successes: Of the graded ones, solved (the run's leaderboard's ``successes``).
        graded: Of which graded: attributed to the agent (the leaderboard's ``episodes``);
            the others are benchmark or infrastructure errors.
    """

    run_id: str
    suite: str
    suite_name: str
    suite_description: str
    created_at: str
    episodes: int
    successes: int
    graded: int = 0


@dataclass
class SiteData:
    """The dataset as the site needs it.

    Attributes:
        out_dir: The results directory (screenshots are relative to it).
        run_id: The run shown, or None for every run.
        episodes: Deduplicated episode rows (``read_episodes``).
        steps: The kept episodes' steps, grouped by episode id, in step order.
        board: ``leaderboard(episodes, by)``: what every number of the page comes from.
        max_listed: Episodes listed (and given pages) at most: the most recent.
        runs: Every run shown, newest first.
        title: The site's title: the suite's name, or the one given.
        description: The line under the title: the suite's path, or the one given.
        by: What makes a leaderboard row: agent and model, and suite on a page of
            several runs (``crabray leaderboard``'s rows); the breakdowns and plots
            group by it too.
    """

    out_dir: Path
    run_id: str | None
    episodes: pd.DataFrame
    steps: dict[str, pd.DataFrame] = field(default_factory=dict)
    board: pd.DataFrame = field(default_factory=pd.DataFrame)
    max_listed: int = MAX_LISTED_EPISODES
    runs: list[RunInfo] = field(default_factory=list)
    title: str = "crabray results"
    description: str = ""
    every: pd.DataFrame | None = None
    scope: str = ""
    by: tuple[str, ...] = DEFAULT_BY
    _neighbours: dict[str, tuple[str | None, str | None]] = field(default_factory=dict, repr=False)

    @property
    def all_episodes(self) -> pd.DataFrame:
        """Every episode read, counted or not (run pages and episode pages show them all)."""
        return self.episodes if self.every is None else self.every

    def for_run(self, run_id: str) -> SiteData:
        """The same data restricted to one run (the page of that run)."""
        every = self.all_episodes
        episodes = every[every["run_id"] == run_id].reset_index(drop=True)
        return SiteData(
            out_dir=self.out_dir,
            run_id=run_id,
            episodes=episodes,
            steps=self.steps,
            board=leaderboard_module.leaderboard(episodes),
            max_listed=self.max_listed,
            runs=self.runs,
            title=self.title,
            description=self.description,
            scope=next(
                (f"run {_named(run)}" for run in self.runs if run.run_id == run_id),
                f"run {run_id}",
            ),
        )

    @property
    def listed(self) -> pd.DataFrame:
        """The episodes the site lists and writes pages for: the most recent ``max_listed``.

        Aggregates and plots use every episode; a sweep of a million episodes
        would otherwise mean a million pages and a million-row index.
        """
        if len(self.episodes) <= self.max_listed:
            return self.episodes
        recent = self.episodes.sort_values("finished_at", ascending=False, kind="stable")
        return recent.head(self.max_listed).sort_index()

    def episode(self, episode_id: str) -> pd.Series | None:
        """The episode row with this id (counted or not), or None."""
        rows = self.all_episodes[self.all_episodes["episode_id"] == episode_id]
        return None if rows.empty else rows.iloc[0]

    def neighbours(self, episode_id: str) -> tuple[str | None, str | None]:
        """The episodes listed before and after this one: an episode page's previous and next.

        The order is the episode list's (run, agent, task, epoch) on the page the
        episode is listed on: the index, or else its run's page.
        """
        if not self._neighbours:
            listed = [str(e) for e in self.listed["episode_id"]] if len(self.episodes) else []
            every = self.all_episodes
            runs = (
                [[str(e) for e in group] for _, group in every.groupby("run_id")["episode_id"]]
                if len(every)
                else []
            )
            for ids in (*runs, listed):  # the index's order wins for an episode it lists
                for position, shown in enumerate(ids):
                    self._neighbours[shown] = (
                        ids[position - 1] if position > 0 else None,
                        ids[position + 1] if position + 1 < len(ids) else None,
                    )
        return self._neighbours.get(episode_id, (None, None))

    def steps_of(self, episode_id: str) -> pd.DataFrame:
        """The steps of one episode (an empty frame if it has none)."""
        found = self.steps.get(episode_id)
        return found if found is not None else pd.DataFrame()


def fingerprint(out_dir: Path, run_id: str | None = None) -> Fingerprint:
    """A cheap summary of the dataset's files: equal fingerprints mean equal data.

    Committed files are only ever added (by a sink) or replaced (by a
    compaction), both of which change the listing, sizes or times.
    """
    entries: list[tuple[str, int, int]] = []
    for table in TABLES:
        if run_id is not None:
            directories = [partition_dir(out_dir, table, run_id)]
        else:
            root = table_root(out_dir, table)
            directories = sorted(root.glob("run_id=*")) if root.is_dir() else []
        for directory in directories:
            for path in part_files(directory):
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue  # replaced by a compaction right now: the listing already differs
                entries.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


def _manifests(out: Path, run_ids: list[str]) -> dict[str, RunManifest]:
    """The manifests of the runs that have one; a run written without one is still shown."""
    known = set(list_runs(out))
    manifests = {}
    for run in run_ids:
        if run not in known:
            continue
        try:
            manifests[run] = read_manifest(out, run)
        except ResultsError as exc:  # the run's episodes still show, without its suite
            logger.warning("run picker: %s", exc)
    return manifests


def _runs(episodes: pd.DataFrame, manifests: dict[str, RunManifest]) -> list[RunInfo]:
    """Every run with episodes or a manifest, newest first (run ids sort by start time)."""
    graded = episodes["attribution"] == Attribution.AGENT.value
    grouped = episodes.assign(
        graded=graded, solved=graded & episodes["success"].astype(bool)
    ).groupby("run_id")
    sizes = {str(run): int(size) for run, size in grouped.size().items()}
    solved = {str(run): int(count) for run, count in grouped["solved"].sum().items()}
    agents = {str(run): int(count) for run, count in grouped["graded"].sum().items()}
    run_ids = sorted({*manifests, *sizes}, reverse=True)
    infos = []
    for run in run_ids:
        manifest = manifests.get(run)
        infos.append(
            RunInfo(
                run_id=run,
                suite=manifest.suite if manifest else "",
                suite_name=manifest.suite_name if manifest else "",
                suite_description=manifest.suite_description if manifest else "",
                created_at=f"{manifest.created_at:%Y-%m-%d %H:%M} UTC" if manifest else "",
                episodes=sizes.get(run, 0),
                successes=solved.get(run, 0),
                graded=agents.get(run, 0),
            )
        )
    return infos


def suite_label(name: str, path: str) -> str:
    """How a header names a suite: its name, else its path as typed when short (relative),
    else the path's last folder. Absolute paths are long and say where a machine keeps
    its checkout, which a shared site has no use for."""
    if name:
        return name
    if not path or not PurePosixPath(path).is_absolute():
        return path
    return PurePosixPath(path).name or path


def _title(runs: list[RunInfo], episodes: pd.DataFrame) -> tuple[str, str]:
    """The title and the line under it: the suite's name and description (or path) when
    every run shown ran one suite; a neutral title and the suites' names otherwise."""
    names = {run.suite_name for run in runs if run.suite_name}
    descriptions = {run.suite_description for run in runs if run.suite_description}
    paths = {run.suite for run in runs if run.suite} or {
        str(suite) for suite in episodes.get("suite", pd.Series(dtype=str)).unique()
    }
    one_suite = len(names) <= 1
    title = next(iter(names)) if len(names) == 1 else "crabray results"
    if one_suite and len(descriptions) == 1:
        return title, next(iter(descriptions))
    if len(paths) == 1:
        return title, f"suite {suite_label('', paths.pop())}"
    labels = {suite_label(run.suite_name, run.suite) for run in runs if run.suite} or {
        suite_label("", path) for path in paths
    }
    return title, ("suites " + ", ".join(sorted(labels))) if labels else ""


def _fill_instructions(episodes: pd.DataFrame) -> pd.DataFrame:
    """Rows without an instruction take it from another episode of the same task.

    Rows the driver wrote for an episode that never started (setup, env and
    timeout errors) lacked it before they recorded the task's; the page of such
    an episode still says what the agent would have been asked.
    """
    if episodes.empty or "description" not in episodes.columns:
        return episodes
    given = episodes["description"].fillna("").astype(str)
    missing = given == ""
    if not missing.any() or missing.all():
        return episodes
    known = (
        episodes[~missing]
        .drop_duplicates(["suite", "task_id"])
        .set_index(["suite", "task_id"])["description"]
    )
    keys = pd.MultiIndex.from_frame(episodes.loc[missing, ["suite", "task_id"]])
    episodes = episodes.copy()
    episodes.loc[missing, "description"] = known.reindex(keys).fillna("").to_numpy()
    return episodes


def load(
    out_dir: str | Path,
    run_id: str | None = None,
    max_listed: int = MAX_LISTED_EPISODES,
    *,
    title: str | None = None,
    description: str | None = None,
    all_runs: bool = False,
) -> SiteData:
    """Read what the site shows from ``out_dir``.

    Without ``run_id`` the index counts what ``crabray leaderboard`` counts: per
    task the latest run's episodes (``crabray.results.board.selection``), every
    run's with ``all_runs``, and its leaderboard has a row per suite; run pages
    and episode pages still show every run's episodes.

    Args:
        out_dir: The results directory.
        run_id: Show only this run; every run when None.
        max_listed: List and write pages for at most this many (most recent) episodes.
        title: The site's title; the suite's name by default.
        description: The line under the title; the suite's path by default.
        all_runs: Count every run's episodes on the index, a task run twice counting twice.

    Raises:
        ResultsError: A bad run id or an unreadable part file (named in the message).
    """
    out = Path(out_dir)
    if run_id is not None:
        check_run_id(run_id)
    episodes = _fill_instructions(read_episodes(out, run_id))
    episodes = episodes.sort_values(
        ["run_id", "agent", "task_id", "epoch"], kind="stable"
    ).reset_index(drop=True)
    steps = read_steps(out, run_id)
    by_episode = {
        str(episode_id): group.reset_index(drop=True)
        for episode_id, group in steps.groupby("episode_id", sort=False)
    }
    run_ids = [run_id] if run_id is not None else list_runs(out)
    runs = _runs(episodes, _manifests(out, run_ids))
    default_title, default_description = _title(runs, episodes)
    logger.debug("site data: %d episodes, %d steps from %s", len(episodes), len(steps), out)
    every = episodes
    if run_id is None and not all_runs and not episodes.empty:
        rows = pa.Table.from_pandas(episodes[["run_id", *LATEST_KEY]], preserve_index=False)
        episodes = episodes[latest_mask(rows)].reset_index(drop=True)
    counted = set(episodes["run_id"]) if not episodes.empty else set()
    included = [run for run in runs if run.run_id in counted]
    if run_id is not None:
        scope = f"run {_named(included[0])}" if included else f"run {run_id}"
        included = []
    elif all_runs:
        scope = "every run summed (a task run twice counts twice)"
    else:
        scope = "per task the latest run's episodes"
    by = ("agent", "model") if run_id is not None else ("agent", "model", "suite")
    return SiteData(
        out_dir=out,
        run_id=run_id,
        episodes=episodes,
        steps=by_episode,
        board=leaderboard_module.leaderboard(episodes, by),
        max_listed=max_listed,
        runs=runs,
        title=title or default_title,
        description=default_description if description is None else description,
        every=every,
        scope=_scope(included, scope),
        by=by,
    )


def _scope(included: list[RunInfo], what: str) -> str:
    """The header line that says what a page counts and which runs (suite, creation time)."""
    if not included:
        return what
    return f"{what}: runs " + ", ".join(_named(run) for run in included)


def _named(run: RunInfo) -> str:
    """A run as a header names it: ``ID (suite, created TIME)``."""
    created = f", created {run.created_at}" if run.created_at else ""
    suite = suite_label(run.suite_name, run.suite)
    return f"{run.run_id} ({suite or 'no manifest'}{created})"


def breakdowns(episodes: pd.DataFrame, by: Sequence[str] = DEFAULT_BY) -> dict[str, pd.DataFrame]:
    """Per-tag and per-termination-reason tables, titled for the index page.

    Uses ``crabray.results.board.leaderboard.breakdown`` when it exists, for each
    ``by`` group (the page's leaderboard rows); otherwise the per-tag table is the
    leaderboard of each tag's episodes and the per-reason table counts episodes per
    reason and agent.
    """
    if episodes.empty:
        return {}
    breakdown = getattr(leaderboard_module, "breakdown", None)
    if breakdown is not None:
        return {
            "by tag": breakdown(episodes, "tag", by),
            "by termination reason": breakdown(episodes, "termination_reason", by),
        }
    tagged = episodes.explode("tags").dropna(subset=["tags"])
    per_tag = [
        leaderboard_module.leaderboard(group).assign(tag=tag)
        for tag, group in tagged.groupby("tags", sort=True)
    ]
    by_tag = (
        pd.concat(per_tag, ignore_index=True)
        if per_tag
        else pd.DataFrame(columns=["tag", *leaderboard_module.LEADERBOARD_COLUMNS])
    )
    by_tag = by_tag[["tag", *[c for c in by_tag.columns if c != "tag"]]]
    counts = (
        episodes.groupby(["termination_reason", "agent", "model"], dropna=False)
        .size()
        .rename("episodes")
        .reset_index()
    )
    totals = episodes.groupby(["agent", "model"], dropna=False).size().rename("agent_episodes")
    counts = counts.join(totals, on=["agent", "model"])
    counts["share"] = counts["episodes"] / counts["agent_episodes"]
    by_reason = counts.drop(columns="agent_episodes").sort_values(
        ["termination_reason", "agent", "model"], kind="stable"
    )
    return {"by tag": by_tag, "by termination reason": by_reason.reset_index(drop=True)}


def resolve_screenshot(out_dir: Path, relative: str) -> Path:
    """The file a step's ``screenshot_path`` names, refusing paths that leave ``out_dir``.

    Raises:
        ResultsError: The path is absolute or climbs out of the output directory;
            results are data, and a site must not copy or serve arbitrary files.
    """
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ResultsError(
            f"screenshot path {relative!r} is not a path inside the output directory"
        )
    root = out_dir.resolve()
    path = (root / Path(*pure.parts)).resolve()
    if not path.is_relative_to(root):
        raise ResultsError(f"screenshot path {relative!r} leaves the output directory {root}")
    return path


def existing_screenshot(out_dir: Path, relative: str) -> Path | None:
    """The screenshot file a step names, if it is inside ``out_dir`` and exists.

    A refused or missing file is logged and gives None: its step shows a note
    instead of an image, and the rest of the page still renders.
    """
    try:
        path = resolve_screenshot(out_dir, relative)
    except ResultsError as exc:
        logger.warning("not showing a screenshot: %s", exc)
        return None
    if not path.is_file():
        logger.warning("screenshot %s is missing; its step shows a note instead", path)
        return None
    return path
