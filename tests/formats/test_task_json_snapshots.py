"""Per-snapshot backend settings of task-JSON suites (``snapshots.toml``), on real docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crabray.formats import SuiteErrors, load_suite, resolve_suite
from crabray.results import read_episodes
from crabray.run import check_suite
from tests.backends.docker.dockerd import BUSYBOX_IMAGE, require_docker
from tests.conftest import crabray
from tests.formats.test_task_json import write_task

TASK = {
    "instruction": "Write hello into /root/out.txt.",
    "evaluation": {
        "func": "compare_text_file",
        "arguments": {"local_expected": "gold.txt", "vm_result": "/root/out.txt"},
    },
    "solution": [
        {"action": "write_file", "arguments": {"path": "/root/out.txt", "content": "hello\n"}}
    ],
}


def suite(tmp_path: Path, snapshots: str | None) -> Path:
    root = tmp_path / "suite"
    for task_id, snapshot in (("plain", None), ("boxed", "busy-box")):
        write_task(
            root,
            {**TASK, **({"snapshot": snapshot} if snapshot else {})},
            task_id=task_id,
            files={"gold.txt": "hello\n"},
        )
    if snapshots is not None:
        (root / "snapshots.toml").write_text(snapshots)
    return root


def test_each_snapshot_gets_its_own_table_else_the_default(tmp_path: Path) -> None:
    root = suite(
        tmp_path,
        '[docker.default]\nimage = "a:1"\n\n[docker.busy-box]\nimage = "b:2"\nmemory_mb = 64\n'
        '[local.default]\nroot_dir = "/srv"\n',
    )
    loaded = load_suite(resolve_suite(root, backend="docker"))
    settings = {
        task_id: entry.benchmark.task_environments(entry.task)[0].backend_settings
        for task_id, entry in loaded.entries.items()
    }
    assert settings == {"plain": {"image": "a:1"}, "boxed": {"image": "b:2", "memory_mb": 64}}
    on_local = load_suite(resolve_suite(root, backend="local"))
    envs = on_local.entry("boxed").benchmark.environments
    assert [e.backend_settings for e in envs] == [{"root_dir": "/srv"}] * 2


def test_a_malformed_snapshots_file_names_file_and_field(tmp_path: Path) -> None:
    root = suite(tmp_path, '[docker]\ndefault = "crabray/busybox"\n')
    with pytest.raises(SuiteErrors) as caught:
        load_suite(resolve_suite(root, backend="docker"))
    (error,) = caught.value.errors
    assert error.file == str(root / "snapshots.toml")
    assert error.field == "docker.default"
    assert "must be a table of backend settings" in error.reason

    (root / "snapshots.toml").write_text("[docker.default\n")
    with pytest.raises(SuiteErrors, match=r"snapshots\.toml: is not valid TOML"):
        load_suite(resolve_suite(root, backend="docker"))


@pytest.mark.slow
@pytest.mark.ray
def test_a_suite_runs_on_docker_with_an_image_per_snapshot(tmp_path: Path) -> None:
    require_docker()
    root = suite(tmp_path, f'[docker.default]\nimage = "{BUSYBOX_IMAGE}"\n')
    out = tmp_path / "out"

    done = crabray("run", str(root), "--backend", "docker", "--agent", "oracle", "--out", str(out))

    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert sorted(episodes.task_id) == ["boxed", "plain"]
    assert (episodes.score == 1.0).all(), episodes[["task_id", "score", "error"]].to_string()
    summary = out / "summaries" / episodes.run_id.iloc[0] / "oracle" / "plain" / "summary.json"
    assert json.loads(summary.read_text())["results"]["state"] == "success"


def test_settings_the_backend_rejects_name_the_snapshot_table(tmp_path: Path) -> None:
    root = suite(
        tmp_path, '[docker.default]\nimag = "crabray/busybox"\n\n[docker.unused]\ncpus = "x"\n'
    )
    loaded = load_suite(resolve_suite(root, backend="docker"))
    with pytest.raises(SuiteErrors) as caught:
        check_suite(loaded)
    (error,) = caught.value.errors
    assert (error.file, error.field) == (str(root / "snapshots.toml"), "docker.default.imag")
    assert "unknown setting" in error.reason and "did you mean 'image'?" in error.reason


def test_the_cli_reports_a_bad_snapshot_setting_against_its_file_and_table(
    tmp_path: Path,
) -> None:
    root = suite(tmp_path, '[docker.default]\nimag = "crabray/busybox"\n')
    out = str(tmp_path / "out")
    run = crabray("run", str(root), "--backend", "docker", "--agent", "oracle", "--out", out)
    assert run.returncode == 2, run.stderr
    assert f"{root / 'snapshots.toml'}: docker.default.imag:" in run.stderr
    assert "did you mean 'image'?" in run.stderr and "1 problem" in run.stderr

    (root / "snapshots.toml").write_text('[local.default]\nroot_dirr = "/srv"\n')
    validate = crabray("tasks", "validate", str(root))
    assert validate.returncode == 2, validate.stderr
    assert f"{root / 'snapshots.toml'}: local.default.root_dirr:" in validate.stderr
    assert "did you mean 'root_dir'?" in validate.stderr


@pytest.mark.parametrize(
    ("snapshots", "toml", "backend"),
    [
        # GUI-OS as shipped: every task on the snapshot crabray ships a docker image for.
        (["jupyter", "jupyter"], None, "docker"),
        # crabray's demo: a snapshot with no image runs on local, so the suite does.
        (["jupyter", "workstation"], None, "local"),
        ([None, "jupyter"], None, "local"),
        # snapshots.toml gives every snapshot a docker image, and local nothing.
        (["jupyter", "workstation"], '[docker.default]\nimage = "a:1"\n', "docker"),
        # ... or gives local a table: the suite is meant for local.
        (["jupyter", "jupyter"], '[local.default]\nroot_dir = "/srv"\n', "local"),
    ],
)
def test_with_no_backend_given_the_suite_runs_where_its_snapshots_need(
    tmp_path: Path, snapshots: list[str | None], toml: str | None, backend: str
) -> None:
    root = tmp_path / "suite"
    for index, snapshot in enumerate(snapshots):
        doc = {**TASK, **({"snapshot": snapshot} if snapshot else {})}
        write_task(root, doc, task_id=f"t{index}", files={"gold.txt": "hello\n"})
    if toml is not None:
        (root / "snapshots.toml").write_text(toml)
    assert resolve_suite(root).backend == backend
    other = "local" if backend == "docker" else "docker"
    assert resolve_suite(root, backend=other).backend == other, "--backend wins"
