"""One episode, in-process: setup, observe -> agent -> actions -> evaluate, its record.

``loop`` runs it (``run_episode``) and watches it against its time limit and
the run's stop requests (``watch_episode``). The Ray layer distributes exactly
this: an episode call runs ``watch_episode`` on the actor holding its first
environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.episode.driven import DrivenEpisode
    from crabray.episode.limits import EpisodeLimits
    from crabray.episode.loop import (
        EpisodeCancelled,
        EpisodeSettings,
        WatchedRecord,
        run_episode,
        solution_calls,
        watch_episode,
    )

# Loaded on first use (PEP 562): a run's settings take ``EpisodeLimits`` without
# importing the episode loop, the agents and the backends.
_NAMES = {
    "DrivenEpisode": "crabray.episode.driven",
    "EpisodeLimits": "crabray.episode.limits",
    **{
        name: "crabray.episode.loop"
        for name in (
            "EpisodeCancelled",
            "EpisodeSettings",
            "WatchedRecord",
            "run_episode",
            "solution_calls",
            "watch_episode",
        )
    },
}

__getattr__ = lazy_getattr(__name__, _NAMES)

__all__ = [
    "DrivenEpisode",
    "EpisodeCancelled",
    "EpisodeLimits",
    "EpisodeSettings",
    "WatchedRecord",
    "run_episode",
    "solution_calls",
    "watch_episode",
]
