"""The environment pool against real actors on a real local Ray instance."""

from __future__ import annotations

import shutil
from pathlib import Path

import docker
import pytest
import ray

from crabray.cluster.actors.pool import EnvironmentPool
from crabray.cluster.actors.sandbox import SandboxSpec
from tests.backends.docker.dockerd import BUSYBOX_IMAGE, require_docker

pytestmark = pytest.mark.ray

CAPACITY = {("local", ()): 2, ("other", ()): 1}


def spec(
    tmp_path: Path, name: str = "box", kind: str | None = None, **settings: object
) -> SandboxSpec:
    return SandboxSpec(
        name=name,
        backend="local",
        backend_settings={"root_dir": str(tmp_path / "roots"), **settings},
        host_kind=kind,
    )


def use(actor: object, marker: str) -> str:
    """What an episode does: prepare the sandbox, leave a file behind, report its root."""
    ray.get(actor.prepare.remote())  # type: ignore[attr-defined]
    ray.get(actor.put_file.remote(marker, b"dirty"))  # type: ignore[attr-defined]
    return ray.get(actor.describe.remote())["root"]  # type: ignore[attr-defined]


def test_a_released_environment_is_reset_and_reused(local_ray: None, tmp_path: Path) -> None:
    pool = EnvironmentPool()
    box = spec(tmp_path)
    first = pool.acquire(box, CAPACITY)
    root = use(first, "left-behind.txt")
    pool.release(first)
    ray.get(pool.in_progress())  # its reset; until it ends, a free slot gets a new actor
    again = pool.acquire(box, CAPACITY)
    assert again is first
    ray.get(again.prepare.remote())
    listing = ray.get(again.exec.remote(["ls", "-A"], {}))
    assert listing.stdout == "", "the reused sandbox is clean"
    assert ray.get(again.describe.remote())["root"] == root, "same sandbox, no cold start"
    assert (pool.stats.created, pool.stats.reused) == (1, 1)
    assert pool.stats.hit_rate == 0.5
    pool.shutdown()
    assert not Path(root).exists(), "shutdown closes every sandbox"


def test_an_episode_waits_for_a_reset_or_takes_a_free_slot(local_ray: None, tmp_path: Path) -> None:
    pool = EnvironmentPool()
    box = spec(tmp_path)
    first = pool.acquire(box, CAPACITY)
    use(first, "x.txt")
    busy = first.exec.remote("sleep 3", {})  # type: ignore[attr-defined]
    pool.release(first)  # its reset queues behind the sleep
    one_slot = {("local", ()): 1}
    assert not pool.can_serve([box], one_slot), "no free slot: wait for the reset, never evict"
    assert pool.can_serve([box], CAPACITY), "a free slot: a new actor rather than a queue"
    second = pool.acquire(box, CAPACITY)
    assert second is not first
    ray.get(busy)
    ray.get(pool.in_progress())
    assert pool.acquire(box, CAPACITY) is first, "once reset, the warm actor serves again"
    pool.shutdown()


def test_a_failed_reset_retires_the_environment(local_ray: None, tmp_path: Path) -> None:
    pool = EnvironmentPool()
    box = spec(tmp_path, disk_mb=None)  # a plain directory, which the host can lose
    first = pool.acquire(box, CAPACITY)
    root = Path(use(first, "x.txt"))
    # Break the host: the sandbox's parent directory becomes a file, so the reset fails.
    parent = root.parent
    shutil.rmtree(parent)
    parent.write_text("not a directory")
    pool.release(first)
    ray.wait([pool._members[id(first)].recycling], timeout=30)
    parent.unlink()
    second = pool.acquire(box, CAPACITY)
    assert second is not first, "a sandbox whose reset failed is never handed out again"
    assert pool.stats.failed_resets == 1
    use(second, "y.txt")
    pool.shutdown()


def test_a_full_kind_takes_the_slot_of_an_idle_other_configuration(
    local_ray: None, tmp_path: Path
) -> None:
    pool = EnvironmentPool()
    a, b, c = (spec(tmp_path, name) for name in ("a", "b", "c"))
    actors = [pool.acquire(s, CAPACITY) for s in (a, b)]
    assert not pool.can_serve([c], CAPACITY), "both slots are busy"
    pool.release(actors[0])
    assert pool.can_serve([c], CAPACITY), "an idle 'a' can make room"
    third = pool.acquire(c, CAPACITY)
    assert pool.live()[("local", ())] == 2, "never more actors of a kind than slots"
    assert pool.stats.retired == 1
    use(third, "z.txt")
    pool.shutdown()


def test_kinds_count_their_own_slots(local_ray: None, tmp_path: Path) -> None:
    pool = EnvironmentPool()
    other = spec(tmp_path, "o", kind="other")
    held = pool.acquire(other, CAPACITY)
    assert not pool.can_serve([spec(tmp_path, "o2", kind="other")], CAPACITY)
    assert pool.can_serve([spec(tmp_path, "l")], CAPACITY), "'local' slots are separate"
    use(held, "o.txt")
    pool.shutdown()


def test_unpooled_environments_are_new_sandboxes_in_kept_processes(
    local_ray: None, tmp_path: Path
) -> None:
    pool = EnvironmentPool(pooling=False)
    box = spec(tmp_path)
    first = pool.acquire(box, CAPACITY)
    root = Path(use(first, "x.txt"))
    pool.release(first)
    ray.get(pool.in_progress())  # the renewal; until it ends, a free slot gets a new actor
    assert not root.exists(), "the used sandbox is closed, never reset"
    second = pool.acquire(box, CAPACITY)
    second_root = Path(use(second, "y.txt"))
    assert second_root != root, "a new sandbox"
    assert second is first, "in the same actor (an actor is one process for life)"
    assert (pool.stats.created, pool.stats.reused) == (2, 0), "no episode reused a sandbox"
    pool.shutdown()
    assert not second_root.exists()


def test_trim_retires_idle_environments_nothing_needs(local_ray: None, tmp_path: Path) -> None:
    pool = EnvironmentPool()
    box = spec(tmp_path)
    actor = pool.acquire(box, CAPACITY)
    use(actor, "x.txt")
    pool.release(actor)
    pool.trim(demand={box.pool_key: 0})  # type: ignore[arg-type]
    assert pool.live()[("local", ())] == 0
    assert pool.stats.retired == 1
    pool.shutdown()


def test_warm_starts_sandboxes_ahead(local_ray: None, tmp_path: Path) -> None:
    pool = EnvironmentPool()
    box = spec(tmp_path)
    pool.warm(box, 5, CAPACITY)
    assert pool.live()[("local", ())] == 2, "warming stops at the kind's slots"
    actor = pool.acquire(box, CAPACITY)
    assert pool.stats.reused == 1, "a warmed sandbox serves the first episode"
    ray.get(actor.prepare.remote())
    pool.shutdown()


def test_starts_and_resets_done_ahead_count_for_the_next_episode(
    local_ray: None, tmp_path: Path
) -> None:
    pool = EnvironmentPool()
    box = spec(tmp_path)
    pool.warm(box, 1, CAPACITY)
    ray.get(pool.in_progress())  # acquire takes a ready actor, else a free slot's new one
    actor = pool.acquire(box, CAPACITY)
    assert ray.get(actor.prepare.remote()) > 0, "the warm-up start belongs to the first episode"
    ray.get(actor.put_file.remote("used.txt", b"x"))
    pool.release(actor)
    ray.get(pool.in_progress())
    again = pool.acquire(box, CAPACITY)
    assert again is actor
    assert ray.get(again.prepare.remote()) > 0, "the recycle reset belongs to the next episode"
    assert ray.get(again.prepare.remote()) == 0, "nothing was done ahead of this one"
    pool.shutdown()


def test_containers_are_labelled_with_the_run_they_serve(local_ray: None) -> None:
    require_docker()
    pool = EnvironmentPool(run_id="run-label-1")
    box = SandboxSpec(
        name="box",
        backend="docker",
        backend_settings={"image": BUSYBOX_IMAGE},
        host_kind="local",  # a slot this Ray instance hosts
    )
    actor = pool.acquire(box, CAPACITY)
    ray.get(actor.prepare.remote(), timeout=120)
    container_id = ray.get(actor.describe.remote(), timeout=60)["container"]
    client = docker.from_env()
    try:
        labels = client.containers.get(container_id).labels
    finally:
        client.close()
    assert labels["crabray.run"] == "run-label-1"
    pool.shutdown()


def test_an_episode_takes_all_its_environments_or_none(local_ray: None, tmp_path: Path) -> None:
    """Two slots: a busy 'c' and an idle 'a'. An episode needing 'a' and 'b' would take
    'a' and wait for good for a slot the busy 'c' holds: it waits holding nothing. Once
    'c' is idle, it yields its slot and the episode gets both at once."""
    pool = EnvironmentPool()
    a, b, c = (spec(tmp_path, name) for name in ("a", "b", "c"))
    first, busy = pool.acquire(a, CAPACITY), pool.acquire(c, CAPACITY)
    pool.release(first)
    ray.get(pool.in_progress())
    pool.refresh()  # as the scheduler does once per pass over its queue
    assert not pool.can_serve([a, b], CAPACITY), "'a' is idle, but 'b' has no slot"
    pool.release(busy)
    ray.get(pool.in_progress())
    pool.refresh()  # as the scheduler does once per pass over its queue
    assert pool.can_serve([a, b], CAPACITY), "the idle 'c' yields its slot"
    got_a, got_b = pool.acquire_all([a, b], CAPACITY)
    assert got_a is first, "the warm 'a' serves"
    assert pool.stats.retired == 1, "the idle 'c' was retired for 'b'"
    assert pool.live()[("local", ())] == 2, "never more actors of a kind than slots"
    use(got_b, "b.txt")
    pool.shutdown()
