"""The sweep: what schedules a run's episodes.

The scheduler, its settings, the adaptive concurrency of ``--concurrency auto`` and
the node loads it reads, the run's progress counts and the status board that
``crabray cluster status`` shows. It hands episodes to the actors layer below.
"""
