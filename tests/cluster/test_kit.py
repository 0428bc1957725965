"""The cluster kit works as shipped: cluster/kuberay.yaml and cluster/launcher.yaml.

The KubeRay manifest is checked against the RayCluster schema of KubeRay 1.7.0
(vendored under tests/cluster/kuberay/, see its README) as ``kubectl apply``
does with strict field validation, then against the rules KubeRay's operator
adds (ported from ray-operator/controllers/ray/utils/validation.go of that
release). The launcher file goes through Ray's own preparation and validation,
the steps ``ray up`` takes before it touches a machine.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import ray.autoscaler
import yaml

from crabray.cluster.runtime.nodes import node_config
from crabray.cluster.runtime.placement import node_labels, node_resources
from tests.conftest import ROOT

KUBERAY = ROOT / "cluster" / "kuberay.yaml"
LAUNCHER = ROOT / "cluster" / "launcher.yaml"
RAYCLUSTER_SCHEMA = Path(__file__).parent / "kuberay" / "raycluster-v1.schema.json"
VENV_BIN = "~/crabray-venv/bin"

# --- KubeRay -------------------------------------------------------------------------------


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused, as the API server's strict field validation does.

    A structural schema lists every field; only ``x-kubernetes-preserve-unknown-fields``
    objects (and maps, which give ``additionalProperties``) take others.
    """
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def schema_errors(cluster: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(strict(json.loads(RAYCLUSTER_SCHEMA.read_text())))
    return [
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in validator.iter_errors(cluster)
    ]


DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
RAY_START_RESOURCES = ("num-cpus", "num-gpus", "memory", "resources")


def _label_problems(group: str, labels: dict[str, str]) -> list[str]:
    """Kubernetes' qualified-name and label-value syntax (KubeRay's validateRayGroupLabels)."""
    problems = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if not (len(name) <= 63 and LABEL_NAME.fullmatch(name)) or (
            prefix and not (len(prefix) <= 253 and LABEL_PREFIX.fullmatch(prefix))
        ):
            problems.append(f"invalid label key for {group} group: '{key}'")
        if not isinstance(value, str) or not (
            value == "" or (len(value) <= 63 and LABEL_NAME.fullmatch(value))
        ):
            problems.append(f"invalid label value for key '{key}' in {group} group: '{value}'")
    return problems


def _group_problems(name: str, group: dict[str, Any]) -> list[str]:
    params, resources = group.get("rayStartParams", {}), group.get("resources", {})
    problems = []
    if not group["template"]["spec"].get("containers"):
        problems.append(f"{name} group should have at least one container")
    if "labels" in params:
        problems.append(
            f"rayStartParams['labels'] is not supported for {name} group; "
            "please use the top-level Labels field instead"
        )
    if any(params.get(key) for key in RAY_START_RESOURCES) and resources:
        problems.append(f"resource fields set in both rayStartParams and Resources for {name}")
    return problems + _label_problems(name, group.get("labels", {}))


def operator_problems(cluster: dict[str, Any]) -> list[str]:
    """What KubeRay 1.7.0's operator rejects beyond the schema (validation.go), for this kit."""
    spec, name = cluster["spec"], cluster["metadata"]["name"]
    problems = []
    if len(name) > 53 or not DNS1035.fullmatch(name):
        problems.append(f"RayCluster name '{name}' is not a DNS-1035 label of at most 53")
    problems += _group_problems("Head", spec["headGroupSpec"])
    autoscaling = spec.get("enableInTreeAutoscaling", False)
    for group in spec.get("workerGroupSpecs", []):
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        if not autoscaling and (low is None or high is None):
            problems.append(f"worker group {group['groupName']} must set min and maxReplicas")
        if low is not None and high is not None and not 0 <= low <= high:
            problems.append(f"worker group {group['groupName']}: minReplicas > maxReplicas")
        problems += _group_problems(group["groupName"], group)
    if spec.get("autoscalerOptions", {}).get("idleTimeoutSeconds", 0) < 0:
        problems.append("autoscalerOptions.idleTimeoutSeconds must be non-negative")
    return problems


def envsubst(text: str, name: str, value: str) -> str:
    """``envsubst '$NAME'``: only that variable is replaced, every other ``$`` left alone."""
    return re.sub(rf"\$(?:{name}\b|\{{{name}\}})", lambda _: value, text)


def kuberay_documents(token: str = "t0ken") -> dict[str, dict[str, Any]]:
    """The manifest's documents by kind, with the token filled in as the comments say."""
    text = envsubst(KUBERAY.read_text(), "CRABRAY_RAY_TOKEN", token)
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text)}


def test_the_kuberay_manifest_is_a_valid_raycluster() -> None:
    cluster = kuberay_documents()["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1"
    assert schema_errors(cluster) == []
    assert operator_problems(cluster) == []
    head = cluster["spec"]["headGroupSpec"]["rayStartParams"]
    assert head.get("include-dashboard", "true") == "true", "runs are submitted to the dashboard"


def test_the_kuberay_checks_catch_what_kuberay_rejects() -> None:
    cluster = kuberay_documents()["RayCluster"]
    docker = cluster["spec"]["workerGroupSpecs"][0]
    old = copy.deepcopy(cluster)  # what the manifest said before: labels among rayStartParams
    old["spec"]["workerGroupSpecs"][0]["rayStartParams"] = {"labels": "crabray-docker=yes"}
    assert "rayStartParams['labels'] is not supported" in operator_problems(old)[0]
    typo = copy.deepcopy(cluster)
    typo["spec"]["workerGroupSpecs"][0]["minReplica"] = docker["minReplicas"]
    assert any("'minReplica' was unexpected" in e for e in schema_errors(typo))
    bad_label = copy.deepcopy(cluster)
    bad_label["spec"]["workerGroupSpecs"][0]["labels"] = {"crabray docker": "yes"}
    assert any("invalid label key" in p for p in operator_problems(bad_label))


def test_each_kuberay_group_advertises_what_crabray_schedules_on() -> None:
    groups = kuberay_documents()["RayCluster"]["spec"]["workerGroupSpecs"]
    assert {g["groupName"] for g in groups} == {"docker", "vm"}
    for group in groups:
        kind = group["groupName"]
        slots = int(group["resources"][f"crabray_{kind}"])
        assert {k: float(v) for k, v in group["resources"].items()} == node_resources({kind: slots})
        assert group["labels"] == node_labels({kind: slots})


def test_the_kuberay_token_secret_is_a_template_kuberay_reads() -> None:
    assert "${CRABRAY_RAY_TOKEN}" in KUBERAY.read_text()
    docs = kuberay_documents(token="s3cret")
    secret, cluster = docs["Secret"], docs["RayCluster"]
    auth = cluster["spec"]["authOptions"]
    assert auth == {"mode": "token", "secretName": secret["metadata"]["name"]}
    assert secret["stringData"] == {"auth_token": "s3cret"}, "KubeRay reads the key auth_token"
    assert "envsubst '$CRABRAY_RAY_TOKEN' < cluster/kuberay.yaml | kubectl apply" in (
        KUBERAY.read_text()
    )


# --- Ray's cluster launcher ----------------------------------------------------------------


def launcher_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(LAUNCHER.read_text())
    return config


def test_the_launcher_file_passes_rays_own_checks() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    # What `ray up` does first (commands._bootstrap_config): fill in the provider's
    # defaults, then validate against ray/autoscaler/ray-schema.json and more.
    prepared = prepare_config(launcher_config())
    validate_config(prepared)
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(prepared, schema)

    (node_type,) = prepared["available_node_types"].values()
    workers = len(launcher_config()["provider"]["worker_ips"])
    assert node_type["min_workers"] == node_type["max_workers"] == workers, "all workers run"
    assert prepared["idle_timeout_minutes"] > 0


def commands(config: dict[str, Any]) -> list[str]:
    keys = ("setup_commands", "head_start_ray_commands", "worker_start_ray_commands")
    return [line for key in keys for line in config[key]]


def test_every_ray_and_crabray_command_of_the_launcher_runs_in_the_venv() -> None:
    config = launcher_config()
    programs = [
        word
        for line in commands(config)
        for word in shlex.split(line)
        if word.rsplit("/", 1)[-1] in ("ray", "crabray", "python")
    ]
    assert programs, "the file runs Ray"
    assert all(p.startswith(f"{VENV_BIN}/") for p in programs), programs
    head = " ".join(config["head_start_ray_commands"])
    # The head runs the autoscaler, which starts the workers.
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "RAY_AUTH_MODE=token" in head
    # Runs are submitted to the head's dashboard (Ray's Job Submission API), from other machines.
    assert "--dashboard-host=0.0.0.0" in head and "--include-dashboard=false" not in head
    assert any("ray[default]" in line for line in config["setup_commands"])


def test_the_launcher_workers_advertise_their_sandbox_slots() -> None:
    start = shlex.split(launcher_config()["worker_start_ray_commands"][-1])
    at = start.index(f"{VENV_BIN}/crabray")
    assert start[at + 1 : at + 3] == ["cluster", "start-worker"]
    hosts = next(word.split("=", 1)[1] for word in start if word.startswith("--hosts="))
    assert node_config(hosts, None, None, None).hosts == {"docker": 8, "vm": 2}
