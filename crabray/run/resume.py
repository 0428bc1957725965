"""``crabray run --resume RUN``: the run's own settings, from its manifest.

A resume needs nothing but the run's id (or ``latest``, the most recent run
under the results root): the suite, the agents and their agents file, the
epochs, the task selection and every option that decides what an episode is
come from the manifest the run wrote when it started.

An option given alongside ``--resume`` is of one of two kinds:

- what the episodes are (the fields whose metadata says ``resume="fixed"``:
  epochs, tasks, step and time limits, suite format and its options; and the
  suite, agents and agents file): it must equal what the run recorded, else the
  resume is refused: a run whose episodes differ is another run;
- how they run (``resume="kept"``: concurrency, attempts, pooling, warm-up,
  local slots, the run's budget): it applies to the resume, which may use
  other resources (a higher budget lets a run stopped by its budget go on).

The rules are read from the fields of ``RunSpec`` (``crabray.core.setting``),
not listed here: a new field says what a resume does with it where it is
declared.

A manifest written before a field was recorded has no value for it: the
resume then says which option to pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crabray.core.errors import ConfigError, ResultsError
from crabray.core.redact import REDACTED
from crabray.core.setting import flag_of, resume_rule
from crabray.results import RunManifest, latest_run, list_runs, read_manifest
from crabray.results.store.root import ResultsRoot
from crabray.run.spec import FLAT_KEYS, RunSpec, field_of, recorded_backend_settings, validated

LATEST = "latest"


def keys_with(rule: str) -> list[str]:
    """The flat keys whose resume rule is ``rule`` (``fixed`` or ``kept``)."""
    return [key for key in FLAT_KEYS if resume_rule(field_of(key)) == rule]


def resume_spec(spec: RunSpec) -> RunSpec:
    """``spec`` (a ``--resume``'s) completed from the run's manifest, its id resolved.

    Args:
        spec: The run as given; ``spec.results.resume`` is a run id or ``latest``, and
            the fields set (``RunSpec.given``) are those the user gave.

    Raises:
        ConfigError: An option given differs from what the run recorded, or the
            manifest predates a field the resume needs (the message names the flag).
        ResultsError: The run (or any run, for ``latest``) is not in the results root.
    """
    if spec.results.resume is None:
        return spec
    manifest = _read(spec.results.out_dir, spec.results.resume)
    given = spec.given()
    values = spec.flat()
    update: dict[str, Any] = {"resume": manifest.run_id}
    if "suite" not in given or spec.what.suite is None:
        update["suite"] = manifest.suite
    if "agents" not in given or not spec.agents.names:
        update["agents"] = list(manifest.agents)
    update |= _agent_config(spec, manifest)
    for key in keys_with("fixed"):
        flag = flag_of(key, field_of(key))
        recorded = manifest.options.get(key)
        if key == "backend_settings":
            _check_secret_settings(manifest, given)
        if key in given:
            value = values[key]
            if key == "backend_settings" and spec.what.backend_settings:
                # compared as recorded: no secret shown
                value = recorded_backend_settings(spec.what.backend_settings)
            if key in manifest.options and recorded != value:
                raise ConfigError(
                    f"run {manifest.run_id} was started with {key}={recorded!r}, not {value!r}; "
                    f"pass the same {flag} to resume it, or leave it out (a resume takes it "
                    "from the run)",
                    field="--resume",
                )
        elif key in manifest.options:
            update[key] = recorded
        else:
            raise _predates(manifest, key, flag)
    for key in keys_with("kept"):
        if key not in given and manifest.options.get(key) is not None:
            update[key] = manifest.options[key]
    return validated({**spec.flat(given_only=True), **update})


def _check_secret_settings(manifest: RunManifest, given: set[str]) -> None:
    """Refuse a resume that does not give again the secret backend settings the run had.

    The manifest recorded them without their values (``recorded_backend_settings``).

    Raises:
        ConfigError: ``--backend-setting`` was not given; the message lists what to pass.
    """
    recorded = manifest.options.get("backend_settings") or {}
    secret = [key for key, value in recorded.items() if value == REDACTED]
    if not secret or "backend_settings" in given:
        return
    flags = " ".join(
        f"--backend-setting {key}={'VALUE' if value == REDACTED else value}"
        for key, value in recorded.items()
    )
    raise ConfigError(
        f"run {manifest.run_id} was started with the secret backend setting(s) "
        f"{', '.join(secret)}, which its manifest does not keep; pass the run's backend "
        f"settings again to resume it: {flags}",
        field="--backend-setting",
    )


def _read(given: ResultsRoot, run_id: str) -> RunManifest:
    """The manifest of ``run_id`` (``latest``: the newest run) under a folder or a store."""
    with given.readable(whole=False) as root:
        return _read_local(root, run_id, given)


def _read_local(root: Path, run_id: str, given: ResultsRoot) -> RunManifest:
    if run_id == LATEST:
        found = latest_run(root)
        if found is None:
            raise ConfigError(
                f"no run to resume in {given.shown}: it holds no run; give the results root the "
                "run went to with --out",
                field="--resume",
            )
        run_id = found
    elif given.is_store and run_id not in list_runs(root):
        raise ResultsError(f"--resume {run_id}: no run {run_id} in {given.shown}")
    return read_manifest(root, run_id)


def _agent_config(spec: RunSpec, manifest: RunManifest) -> dict[str, object]:
    """The agents file: the run's, checked against one given; or say to pass it."""
    recorded = manifest.agent_config
    given = spec.agents.agent_config
    if given is not None:
        if recorded is not None and Path(given).resolve() != Path(recorded).resolve():
            raise ConfigError(
                f"run {manifest.run_id} read its agents from {recorded}, not {given}; pass the "
                "same --agent-config to resume it, or leave it out",
                field="--resume",
            )
        return {}
    if "agent_config" in manifest.model_fields_set:
        return {"agent_config": recorded}
    from crabray.agents.config import bare_kinds

    configured = [name for name in manifest.agents if name not in bare_kinds()]
    if configured:
        raise ConfigError(
            f"run {manifest.run_id}'s manifest (crabray {manifest.crabray_version}) does not "
            f"record the agents file that defines {', '.join(configured)}; pass it with "
            "--agent-config FILE",
            field="--resume",
        )
    return {}


def _predates(manifest: RunManifest, name: str, flag: str) -> ConfigError:
    return ConfigError(
        f"run {manifest.run_id}'s manifest (crabray {manifest.crabray_version}) does not "
        f"record {name}; pass {flag} with the value the run was started with",
        field="--resume",
    )
