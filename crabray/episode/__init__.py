"""One episode, in-process: setup, observe -> agent -> actions -> evaluate, its record.

``loop`` runs it (``run_episode``) and watches it against its time limit and
the run's stop requests (``watch_episode``). The Ray layer distributes exactly
this: an episode call runs ``watch_episode`` on the actor holding its first
environment.
"""

from crabray.episode.driven import DrivenEpisode
from crabray.episode.loop import (
    EpisodeCancelled,
    EpisodeSettings,
    WatchedRecord,
    run_episode,
    solution_calls,
    watch_episode,
)

__all__ = [
    "DrivenEpisode",
    "EpisodeCancelled",
    "EpisodeSettings",
    "WatchedRecord",
    "run_episode",
    "solution_calls",
    "watch_episode",
]
