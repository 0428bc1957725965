"""Reports of a results dataset as a website: a static site, or served live by ``crabray view``.

::

    SITE/index.html                 every run: task x agent matrix, leaderboard, plots,
                                    breakdowns, every episode
    SITE/run-<RUN>.html             the same for one run (the run picker's links)
    SITE/compare.html               two runs compared per task (with two runs or more)
    SITE/episodes/<episode_id>.html the verdict, whose doing it is and the cause first; then
                                    the model conversation beside every step, the evaluator
                                    graph, the metadata
    SITE/side-by-side.html          two episode pages next to each other (?a=<id>&b=<id>)
    SITE/files/<screenshot path>    screenshots, copied from the output directory

Pages come from Jinja2 templates with autoescaping (``templates/``). They are
self-contained: styles, the site's scripts and the plots (SVG) are inline, and
nothing is loaded from the network, so the folder can be opened from disk,
archived or published as it is. All task text and agent output is escaped: it
is untrusted input. Nothing but the dataset and run manifests' suite names is
shown (no configuration, hence no key, can leak into a page).

This package imports matplotlib, so ``crabray.results`` does not import it:
``from crabray.results.site import build_site``.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from crabray.core.errors import ResultsError
from crabray.results.site._audit import AUDIT_PAGE, audit_reports, render_audit
from crabray.results.site._data import (
    MAX_LISTED_EPISODES,
    SiteData,
    existing_screenshot,
    load,
)
from crabray.results.site._episode import SIDE_BY_SIDE_PAGE, render_episode, render_side_by_side
from crabray.results.site._pages import (
    COMPARE_PAGE,
    EPISODES_DIR,
    FILES_DIR,
    LOGS_DIR,
    episode_page_name,
    render_compare,
    render_index,
    run_log_url,
    run_page_name,
    screenshot_url,
)
from crabray.results.site._serve import LiveSite, make_server
from crabray.results.store._layout import check_output_dir
from crabray.results.store.runs import run_log_path

__all__ = ["LiveSite", "SiteData", "build_site", "make_server"]

logger = logging.getLogger(__name__)


def _copy_run_log(out: Path, site: Path, run_id: str) -> str | None:
    """Copy the run's log into the site; its link, or None when the run has no log."""
    log = run_log_path(out, run_id)
    if not log.is_file():
        return None
    (site / LOGS_DIR).mkdir(exist_ok=True)
    shutil.copyfile(log, site / run_log_url(run_id))
    return run_log_url(run_id)


class _ScreenshotCopier:
    """Copies each screenshot an episode page shows into the site, once."""

    def __init__(self, out_dir: Path, site_dir: Path) -> None:
        self.out_dir = out_dir
        self.site_dir = site_dir
        self.done: dict[str, str | None] = {}

    def __call__(self, relative: str) -> str | None:
        if relative not in self.done:
            self.done[relative] = self._copy(relative)
        return self.done[relative]

    def _copy(self, relative: str) -> str | None:
        source = existing_screenshot(self.out_dir, relative)
        if source is None:
            return None
        target = self.site_dir / FILES_DIR / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        return screenshot_url(relative)


def build_site(
    out_dir: str | Path,
    site_dir: str | Path,
    run_id: str | None = None,
    max_listed: int = MAX_LISTED_EPISODES,
    *,
    title: str | None = None,
    description: str | None = None,
    all_runs: bool = False,
) -> Path:
    """Write the static site of a results dataset into ``site_dir``.

    Existing pages are overwritten; nothing else in ``site_dir`` is deleted
    (so pointing it at a folder with other files is not destructive).

    Args:
        out_dir: The results directory (``crabray run --out``).
        site_dir: Where to write the site; created if needed. Must not be
            ``out_dir`` itself, whose ``episodes/`` holds the dataset.
        run_id: Only this run; every run in ``out_dir`` when None.
        max_listed: List and write pages for the most recent episodes, at most this
            many; the leaderboard, plots and breakdowns always cover all of them.
        title: The site's title; the suite's name (from the run manifests) by default.
        description: The line under the title; the suite's path by default.
        all_runs: The index counts every run's episodes (a task run twice counting
            twice); by default per task the latest run's (``load``).

    Returns:
        The path of the site's ``index.html``.

    Raises:
        ResultsError: ``site_dir`` is ``out_dir`` or cannot be written (a file, a read-only
            file system), a bad run id, or an unreadable part file.

    Example:
        >>> build_site("results", "site")  # doctest: +SKIP
        PosixPath('site/index.html')
    """
    out = Path(out_dir)
    site = Path(site_dir)
    if site.resolve() == out.resolve():
        raise ResultsError(
            f"the site cannot be written into the results directory {out} itself "
            "(its episodes/ folder is the dataset); choose another folder, e.g. "
            f"{out / 'site'}"
        )
    check_output_dir(site, "site directory")
    data = load(out, run_id, max_listed, title=title, description=description, all_runs=all_runs)
    pages = site / EPISODES_DIR
    pages.mkdir(parents=True, exist_ok=True)
    copier = _ScreenshotCopier(out, site)
    per_run = {run.run_id: data.for_run(run.run_id) for run in data.runs}
    # The index lists the episodes it counts; a run page its run's, superseded or not.
    listed = dict.fromkeys(
        str(episode_id)
        for shown in (data, *per_run.values())
        for episode_id in shown.listed["episode_id"]
    )
    for episode_id in listed:
        html = render_episode(data, episode_id, copier)
        if html is None:  # the id came from this very frame, so this is a bug
            raise ResultsError(f"episode {episode_id} vanished while the site was built")
        (pages / episode_page_name(episode_id)).write_text(html, encoding="utf-8")
    for run_id_shown, run_data in per_run.items():
        page = render_index(run_data, run_log=_copy_run_log(out, site, run_id_shown))
        (site / run_page_name(run_id_shown)).write_text(page, encoding="utf-8")
    if len(data.runs) > 1:
        (site / COMPARE_PAGE).write_text(render_compare(data), encoding="utf-8")
    (site / SIDE_BY_SIDE_PAGE).write_text(render_side_by_side(data), encoding="utf-8")
    audits = audit_reports(out)
    if audits:
        (site / AUDIT_PAGE).write_text(render_audit(audits, data.title), encoding="utf-8")
    index = site / "index.html"
    index.write_text(render_index(data), encoding="utf-8")
    copied = sum(1 for src in copier.done.values() if src is not None)
    logger.info(
        "site of %d episodes (%d screenshots) written to %s", len(data.episodes), copied, site
    )
    return index
