"""Ray itself: the run's connection or local instance, nodes and placement.

Starting and joining Ray (token auth first), the crabray nodes of a cluster,
which node may host which sandbox, jobs submitted to a head, and the end of a
run on every node. Knows no actors or episodes.

This file imports nothing: importing ``crabray.cluster.runtime.nodes`` must not
import Ray (the reason is in ``crabray.cluster``).
"""
