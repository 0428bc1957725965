"""The actors: environment actors, their pools and pipelines, the episode call.

Each environment actor holds one sandbox on the node that hosts it; an episode
runs as a call on the actor holding its first environment. Also the run's stop
control, driven sessions, and the Ray tasks that check (preflight) and clean up
sandboxes on each node. Knows nothing of the scheduler above it.
"""
