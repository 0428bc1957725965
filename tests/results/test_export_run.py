"""``crabray export`` of real runs, read back by Inspect AI's, Harbor's and Hugging Face's readers.

One results root, two runs, two suites: the demo's first two tasks by oracle and
noop over two epochs, and an LLM agent against a local chat-completions server
(``tests/agents/fake_server.py``) beside the oracle, which has no solution to
replay there (a benchmark error), so the export has messages, token usage,
cost and an error that is not the agent's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.cli.outcomes import EXIT_NOT_THE_AGENTS
from crabray.results import list_runs
from tests.agents.conftest import write_agents_file, write_hello_suite
from tests.agents.fake_server import FakeChatServer, tool_call
from tests.conftest import ROOT, crabray
from tests.results.exported import atif_trajectories, dataset_rows, inspect_logs

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PRICE_IN, PRICE_OUT = 3.0, 15.0
COST = (1100 * PRICE_IN + 80 * PRICE_OUT) / 1e6
"""What the LLM agent's two calls cost: (400 + 700) tokens in, (30 + 50) out."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """The results root, the demo run's id and the LLM run's id."""
    scratch = tmp_path_factory.mktemp("export-runs")
    out = scratch / "results"
    ray_tmp = tempfile.mkdtemp(prefix="crt", dir="/tmp")  # short: Ray's socket paths
    with pytest.MonkeyPatch.context() as patch, FakeChatServer() as server:
        patch.setenv("RAY_TMPDIR", ray_tmp)
        demo = crabray(
            "run", str(ROOT / "tasks" / "demo"), "--agent", "oracle", "--agent", "noop",
            "--limit", "2", "--epochs", "2", "--out", str(out),
        )  # fmt: skip
        assert demo.returncode == 0, demo.stdout + demo.stderr
        server.add(
            tool_call("read_file", usage=(400, 30), path="hello.txt"),
            tool_call("write_file", usage=(700, 50), path="hello.txt", content="hi\n"),
        )
        agents = write_agents_file(
            scratch, name="fake-gpt", kind="openai", model="fake-model-1",
            base_url=server.base_url, retries=0, price_in_per_mtok=PRICE_IN,
            price_out_per_mtok=PRICE_OUT,
        )  # fmt: skip
        llm = crabray(
            "run", str(write_hello_suite(scratch)), "--agent-config", str(agents),
            "--agent", "fake-gpt", "--agent", "oracle", "--out", str(out), "--concurrency", "1",
        )  # fmt: skip
        assert llm.returncode == EXIT_NOT_THE_AGENTS, llm.stdout + llm.stderr  # the oracle's
    shutil.rmtree(ray_tmp, ignore_errors=True)
    first, second = list_runs(out)
    yield out, first, second


def _export(root: Path, run: str, fmt: str, out: Path) -> None:
    done = crabray("export", run, str(root), "--format", fmt, "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr


def test_inspect_opens_both_runs(runs: tuple[Path, str, str], tmp_path: Path) -> None:
    root, demo, llm = runs
    _export(root, demo, "inspect", tmp_path / "logs")
    _export(root, llm, "inspect", tmp_path / "logs")  # one folder, as `inspect view` lists it
    logs = {(log["run_id"], log["solver"]): log for log in inspect_logs(tmp_path / "logs")}
    assert sorted(logs) == sorted(
        [(demo, "oracle"), (demo, "noop"), (llm, "fake-gpt"), (llm, "oracle")]
    )

    oracle = logs[demo, "oracle"]
    assert (oracle["task"], oracle["status"], oracle["epochs"], oracle["total"]) == (
        "demo", "success", 2, 4
    )  # fmt: skip
    assert sorted((s["id"], s["epoch"]) for s in oracle["samples"]) == [
        ("hello-file", 1), ("hello-file", 2), ("make-dirs", 1), ("make-dirs", 2)
    ]  # fmt: skip
    assert {s["scores"]["success"] for s in oracle["samples"]} == {"C"}
    assert oracle["metrics"]["success"]["accuracy"] == 1.0
    hello = next(s for s in oracle["samples"] if s["id"] == "hello-file")
    assert hello["input"].startswith("Create a file named hello.txt")
    assert hello["calls"] == ["write_file"] and hello["roles"] == ["user", "assistant", "tool"]
    assert logs[demo, "noop"]["metrics"]["success"]["accuracy"] == 0.0

    gpt = logs[llm, "fake-gpt"]
    assert (gpt["task"], gpt["model"]) == ("mini", "fake-model-1")
    [sample] = gpt["samples"]
    assert sample["scores"] == {"success": "C", "score": 1.0}
    assert sample["calls"] == ["read_file", "write_file"]
    assert sample["roles"][:2] == ["system", "user"] and sample["roles"].count("tool") == 2
    # The first result is an error the model read; the last, of the call that solved the
    # task, was never sent to it: it comes from the step record.
    assert "no such file" in sample["tool_results"][0]
    assert sample["tool_results"][1] == "wrote 3 characters to hello.txt"
    assert sample["usage"] == {"fake-model-1": [1100, 80, 1180, pytest.approx(COST)]}
    assert gpt["usage"] == sample["usage"]
    [unscored] = logs[llm, "oracle"]["samples"]
    assert unscored["scores"] is None and unscored["attribution"] == "benchmark"
    assert unscored["error"].startswith("benchmark error, not the agent's (not scored)")
    assert logs[llm, "oracle"]["completed"] == 0


def test_harbor_reads_every_episode_of_both_runs(
    runs: tuple[Path, str, str], tmp_path: Path
) -> None:
    root, demo, llm = runs
    _export(root, demo, "atif", tmp_path / "demo")
    _export(root, llm, "atif", tmp_path / "llm")
    demo_found = atif_trajectories(tmp_path / "demo")
    llm_found = {t["agent"]: t for t in atif_trajectories(tmp_path / "llm")}
    assert len(demo_found) == 8 and sorted(llm_found) == ["fake-gpt", "oracle"]
    assert all(t["valid"] and not t["errors"] for t in [*demo_found, *llm_found.values()])
    oracle = next(t for t in demo_found if t["trial"] == "make-dirs__oracle__1")
    assert oracle["sources"][0] == "user" and oracle["calls"]
    assert oracle["crabray"]["success"] is True and oracle["crabray"]["epoch"] == 1

    gpt = llm_found["fake-gpt"]
    assert gpt["calls"] == ["read_file", "write_file"]
    assert gpt["step_tokens"] == [[400, 30], [700, 50]]
    assert gpt["final"][:3] == [1100, 80, pytest.approx(COST)]
    assert gpt["observations"][1] == "wrote 3 characters to hello.txt" and all(gpt["answered"])
    assert llm_found["oracle"]["crabray"]["attribution"] == "benchmark"


def test_datasets_loads_both_runs(runs: tuple[Path, str, str], tmp_path: Path) -> None:
    root, demo, llm = runs
    _export(root, demo, "jsonl", tmp_path)  # a folder: RUN_ID.jsonl in it
    _export(root, llm, "jsonl", tmp_path)
    demo_rows = dataset_rows(tmp_path / f"{demo}.jsonl", tmp_path / "hf")["rows"]
    assert len(demo_rows) == 8
    assert {(r["agent"], r["success"]) for r in demo_rows} == {("oracle", True), ("noop", False)}
    llm_rows = {
        r["agent"]: r for r in dataset_rows(tmp_path / f"{llm}.jsonl", tmp_path / "hf")["rows"]
    }
    gpt = llm_rows["fake-gpt"]
    assert gpt["tokens"] == [1100, 80] and gpt["calls"] == ["read_file", "write_file"]
    assert gpt["actions"] == ["read_file", "write_file"] and "assistant" in gpt["roles"]
    assert llm_rows["oracle"]["attribution"] == "benchmark" and llm_rows["oracle"]["roles"] == []
