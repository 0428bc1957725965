"""Standing up crabray nodes: ``ray start`` with crabray's resources and labels.

A node config says what a machine hosts (sandbox kind -> slots) and which
labels it carries; it comes from ``--hosts docker=8,vm=2`` and ``--labels
k=v`` or from a TOML file (see ``cluster/node.example.toml``). Every node is
started with Ray's token authentication on: the head creates a token if
there is none, and workers must have the same token (``~/.ray/auth_token`` or
``RAY_AUTH_TOKEN``). What a command starts is recorded in a state file, so
``stop`` stops exactly those nodes and no other Ray instance on the machine.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from crabray.cluster.runtime.placement import node_labels, node_resources
from crabray.core.errors import ConfigError, CrabrayError
from crabray.core.naming import check_identifier

logger = logging.getLogger(__name__)

DEFAULT_STATE_FILE = Path(
    os.environ.get("CRABRAY_NODES_FILE", Path.home() / ".crabray" / "nodes.json")
)
"""Where started nodes are recorded; ``CRABRAY_NODES_FILE`` moves it."""
_START_TIMEOUT_SEC = 180.0
_STOP_GRACE_SEC = 10.0
_JOB_AGENT_WAIT_SEC = 60.0
"""How long a started head's dashboard and job agent get to answer (a busy machine: seconds)."""


class NodeConfig(BaseModel):
    """What one machine hosts and how it is labelled."""

    hosts: dict[str, int] = Field(
        default_factory=dict, description="Sandbox kind -> how many it may run at once."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Operator's node labels.")
    num_cpus: int | None = Field(default=None, gt=0, description="CPUs Ray may schedule.")

    @field_validator("hosts")
    @classmethod
    def _valid_hosts(cls, hosts: dict[str, int]) -> dict[str, int]:
        for kind, slots in hosts.items():
            check_identifier(kind, "sandbox kind")
            if slots < 1:
                raise ValueError(f"kind '{kind}' needs at least 1 slot, got {slots}")
        return hosts


class StartedNode(BaseModel):
    """A node a crabray command started: enough to stop it later."""

    role: str
    address: str
    process_group: int
    hosts: dict[str, int]
    started_at: float
    temp_dir: str | None = Field(
        default=None,
        description="The node's own Ray folder (sockets, logs), removed when it is stopped; "
        "None for Ray's shared default.",
    )


def parse_pairs(text: str | None, what: str) -> dict[str, str]:
    """``a=1,b=2`` as a dict.

    Raises:
        ConfigError: An item is not ``key=value``.
    """
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"'{item}' is not KEY=VALUE", field=what)
        pairs[key.strip()] = value.strip()
    return pairs


def node_config(
    hosts: str | None, labels: str | None, config_file: Path | None, num_cpus: int | None
) -> NodeConfig:
    """The node config from a TOML file and/or flags (flags override the file).

    Raises:
        ConfigError: Naming the file or flag and the bad field.
    """
    data: dict[str, object] = {}
    if config_file is not None:
        try:
            data = tomllib.loads(config_file.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read node config: {exc}", file=str(config_file)) from exc
    try:
        host_slots = {k: int(v) for k, v in parse_pairs(hosts, "--hosts").items()}
    except ValueError as exc:
        raise ConfigError(f"slots must be whole numbers: {exc}", field="--hosts") from exc
    merged = {
        "hosts": {**dict(data.get("hosts", {})), **host_slots},  # type: ignore[call-overload]
        "labels": {**dict(data.get("labels", {})), **parse_pairs(labels, "--labels")},  # type: ignore[call-overload]
        "num_cpus": num_cpus or data.get("num_cpus"),
    }
    try:
        return NodeConfig.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(problems, file=str(config_file) if config_file else None) from exc


def routable_address() -> str:
    """This machine's address on its default route: where other machines reach it.

    Ray's own guess when it starts a node, made explicit so that the address
    ``crabray cluster start-head`` prints is the one the head advertises. A UDP
    socket's ``connect`` sends nothing; it only picks the outgoing interface. A
    machine with no route out gets its host name's address, loopback at worst
    (the caller warns: workers elsewhere cannot join that).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("8.8.8.8", 80))
            return str(probe.getsockname()[0])
        except OSError as exc:
            logger.debug("no default route (%s); using the host name's address", exc)
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class DashboardPorts(BaseModel):
    """The ports of a head's Job Submission API: the dashboard's, and its job agent's."""

    dashboard: int = Field(default=8265, description="Ray's dashboard (the Job Submission API).")
    agent: int = Field(
        default=52365, description="The head's job agent, which the dashboard hands each job."
    )


def ray_start_command(
    config: NodeConfig,
    *,
    head_port: int | None,
    address: str | None,
    node_ip: str | None = None,
    dashboard: DashboardPorts | None = None,
    temp_dir: Path | None = None,
) -> list[str]:
    """The ``ray start`` command line of a head (``head_port``) or worker (``address``).

    ``node_ip`` is the address the node advertises to the others; Ray guesses when None.
    A head started with ``dashboard`` serves Ray's dashboard and Job Submission API there.
    ``temp_dir`` is the node's own folder for its sockets and logs (Ray's default when None).
    """
    ray = str(_scripts_dir() / "ray")
    command = [ray, "start", "--disable-usage-stats"]
    if head_port is not None:
        command += ["--head", f"--port={head_port}", *_dashboard_options(dashboard)]
    else:
        command += [f"--address={address}"]
    if node_ip is not None:
        command += [f"--node-ip-address={node_ip}"]
    if temp_dir is not None:
        command += [f"--temp-dir={temp_dir}"]
    if config.num_cpus is not None:
        command += [f"--num-cpus={config.num_cpus}"]
    command += [f"--resources={json.dumps(node_resources(config.hosts))}"]
    labels = node_labels(config.hosts, config.labels)
    if labels:
        command += ["--labels=" + ",".join(f"{k}={v}" for k, v in labels.items())]
    return command


def _scripts_dir() -> Path:
    """Where this installation's commands (``ray``, ``crabray``) are.

    Beside the interpreter in a virtualenv; elsewhere in a system install
    (``/usr/local/bin`` for pip on Debian), which ``sysconfig`` knows.
    """
    beside = Path(sys.executable).parent
    if (beside / "ray").exists():
        return beside
    return Path(sysconfig.get_path("scripts"))


def _dashboard_options(ports: DashboardPorts | None) -> list[str]:
    """A head's dashboard, when wanted: on all interfaces, if Ray's dashboard is installed.

    The dashboard serves Ray's Job Submission API, through which a machine
    that is no node of the cluster submits runs (``crabray run --address
    http://HEAD:8265``); it needs ``ray[default]``. Every request to it must
    carry the cluster's token, as every other connection does.
    """
    if ports is None or not has_dashboard():
        return ["--include-dashboard=false"]
    return [
        "--include-dashboard=true",
        "--dashboard-host=0.0.0.0",
        f"--dashboard-port={ports.dashboard}",
        f"--dashboard-agent-listen-port={ports.agent}",
    ]


def has_dashboard() -> bool:
    """Whether Ray's dashboard (``ray[default]``) is installed here."""
    return importlib.util.find_spec("aiohttp") is not None


def wait_for_job_agent(
    ports: DashboardPorts, timeout_sec: float = _JOB_AGENT_WAIT_SEC, host: str = "127.0.0.1"
) -> None:
    """Wait until the head's dashboard and its job agent both answer, within ``timeout_sec``.

    ``ray start`` returns once its processes are launched, not once they serve:
    a job agent that failed to bind its port (taken by another program) leaves a
    head that says it started but refuses every submission ("No available agent
    to submit job"). Asked directly: the dashboard's ``/api/version``, and the
    agent's ``/api/local_raylet_healthz`` (which answers once the agent serves HTTP).

    Raises:
        CrabrayError: One of them did not answer in time; the message names which,
            its port, and the last answer or error.
    """
    deadline = time.monotonic() + timeout_sec
    for what, url in (
        (
            "Ray's dashboard (the Job Submission API)",
            f"http://{host}:{ports.dashboard}/api/version",
        ),
        ("the head's job agent", f"http://{host}:{ports.agent}/api/local_raylet_healthz"),
    ):
        last = _http_ok(url)
        while last is not None and time.monotonic() < deadline:
            time.sleep(0.5)
            last = _http_ok(url)
        if last is not None:
            raise CrabrayError(
                f"the head started, but {what} did not answer at {url} within "
                f"{timeout_sec:g} s ({last}): runs cannot be submitted to it. Is its port "
                f"taken by another program? Choose other ports (--dashboard-port, "
                f"--job-agent-port)"
            )


def _http_ok(url: str) -> str | None:
    """None if ``url`` answers 200 (with this machine's Ray token, if any); else why not."""
    request = urllib.request.Request(url)
    token = auth_token()
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return None if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except OSError as exc:
        return str(getattr(exc, "reason", exc))
    except http.client.HTTPException as exc:
        # Something that is not HTTP answers there (a gRPC server while Ray starts, or
        # another program holding the port): not ready, and maybe never.
        return f"the port answers, but not in HTTP ({type(exc).__name__})"


def auth_token() -> str | None:
    """This machine's Ray token: ``$RAY_AUTH_TOKEN``, else ``~/.ray/auth_token``."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = Path.home() / ".ray" / "auth_token"
    if not token and path.exists():
        token = path.read_text().strip()
    return token or None


def start_node(
    config: NodeConfig,
    *,
    head_port: int | None = None,
    address: str | None = None,
    node_ip: str | None = None,
    state_file: Path = DEFAULT_STATE_FILE,
    dashboard: DashboardPorts | None = None,
) -> StartedNode:
    """Start a head (``head_port``, with Ray's dashboard on ``dashboard``) or a worker; record it.

    ``node_ip`` is the address the node advertises to the others (Ray guesses when None).
    The node's Ray folder (``--temp-dir``) is the cluster's own, named by the head's
    port (:func:`cluster_folder`), never Ray's shared ``/tmp/ray``: a head's job
    supervisor gives each submitted run the address of the cluster last started in
    its Ray folder (``ray_current_cluster``), so in the shared one any Ray started
    later on the head's machine (a plain ``ray start --head``, a test) received the
    head's submitted runs, which then failed for want of their files or token. The
    same name on every machine keeps a submitted run's files at the same path on
    every node, which episodes need (they load the suite by its path).

    Raises:
        CrabrayError: ``ray start`` failed; its output is in the message.
    """
    role = "head" if head_port is not None else "worker"
    folder = cluster_folder(head_port if head_port is not None else _port_of(str(address)))
    command = ray_start_command(
        config,
        head_port=head_port,
        address=address,
        node_ip=node_ip,
        dashboard=dashboard,
        temp_dir=folder,
    )
    proc = _launch(command, role)
    _await_start(proc, role)
    where = f"127.0.0.1:{head_port}" if role == "head" else str(address)
    node = _started(proc, role, config, where, folder)
    _record(state_file, [*started_nodes(state_file), node])
    return node


def cluster_folder(head_port: int) -> Path:
    """The Ray folder of the nodes crabray starts for the cluster whose head listens on
    ``head_port``: the same path on every machine, and none other cluster's."""
    return Path(tempfile.gettempdir()) / f"crabray-ray-{head_port}"


def _port_of(address: str) -> int:
    """The port of a ``HOST:PORT`` head address.

    Raises:
        CrabrayError: The address has no port.
    """
    port = address.rpartition(":")[2]
    if not port.isdigit():
        raise CrabrayError(f"the head's address {address!r} is not HOST:PORT")
    return int(port)


def start_workers(
    config: NodeConfig,
    count: int,
    *,
    address: str,
    state_file: Path = DEFAULT_STATE_FILE,
) -> list[StartedNode]:
    """Start ``count`` worker nodes on this machine at once, joined to the head at ``address``.

    A ``ray start`` takes seconds (most of it waiting for the raylet to register),
    and one after another a cluster's start-up grew with its nodes (issue 26). Run
    together, several ``ray start`` sharing Ray's temporary folder would race for
    the same socket and log names (Ray numbers them by which exist), so each node
    gets its own (``--temp-dir``, under this machine's temporary folder). The nodes
    that started are recorded even when another failed, so ``stop`` stops them.

    Raises:
        CrabrayError: A ``ray start`` failed; the first failure's output is in the message.
    """
    role = "worker"
    root = Path(tempfile.mkdtemp(prefix="crabray-nodes-"))
    procs = []
    for index in range(count):
        command = ray_start_command(
            config, head_port=None, address=address, temp_dir=root / str(index)
        )
        procs.append(_launch(command, role))
    started, failure = [], None
    for index, proc in enumerate(procs):
        try:
            _await_start(proc, role)
        except CrabrayError as exc:
            failure = failure or exc
            _remove_folder(root / str(index))
            continue
        started.append(_started(proc, role, config, address, root / str(index)))
    _record(state_file, [*started_nodes(state_file), *started])
    if failure is not None:
        raise failure
    return started


def _launch(command: list[str], role: str) -> subprocess.Popen[str]:
    """Run ``ray start`` in a session of its own (its process group is how it is stopped)."""
    # Jobs the node runs find this installation's `crabray` first (a venv not activated).
    path = os.pathsep.join([str(_scripts_dir()), os.environ.get("PATH", "")])
    env = {**os.environ, "RAY_AUTH_MODE": "token", "PATH": path}
    if role == "head":
        _ensure_token(env)
    logger.info("starting a %s node: %s", role, " ".join(command))
    return subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _await_start(proc: subprocess.Popen[str], role: str) -> None:
    """Wait for a ``ray start`` to finish; stop what it started if it failed.

    Raises:
        CrabrayError: It failed or did not finish in time; its output is in the message.
    """
    try:
        output, _ = proc.communicate(timeout=_START_TIMEOUT_SEC)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc.pid)
        raise CrabrayError(f"`ray start` for the {role} node did not finish in time") from exc
    if proc.returncode != 0:
        _kill_group(proc.pid)
        raise CrabrayError(f"`ray start` for the {role} node failed:\n{output.strip()[-2000:]}")


def _started(
    proc: subprocess.Popen[str],
    role: str,
    config: NodeConfig,
    address: str,
    temp_dir: Path | None = None,
) -> StartedNode:
    return StartedNode(
        role=role,
        address=address,
        process_group=proc.pid,
        hosts=config.hosts,
        started_at=time.time(),
        temp_dir=None if temp_dir is None else str(temp_dir),
    )


def started_nodes(state_file: Path = DEFAULT_STATE_FILE) -> list[StartedNode]:
    """The nodes crabray started that are recorded in ``state_file``."""
    if not state_file.exists():
        return []
    try:
        return [StartedNode.model_validate(n) for n in json.loads(state_file.read_text())]
    except (OSError, ValueError) as exc:
        raise CrabrayError(f"{state_file}: not a node state file ({exc}); delete it") from exc


def stop_nodes(state_file: Path = DEFAULT_STATE_FILE) -> list[StartedNode]:
    """Stop every node recorded in ``state_file``, workers first; return them."""
    nodes = started_nodes(state_file)
    for node in sorted(nodes, key=lambda n: n.role == "head"):
        _kill_group(node.process_group)
    for folder in {node.temp_dir for node in nodes}:
        _remove_folder(folder)
    _record(state_file, [])
    return nodes


def stop_node(node: StartedNode, state_file: Path = DEFAULT_STATE_FILE) -> None:
    """Stop one node this machine started, and forget it (the others keep running).

    Its Ray folder goes with it unless another node started here still uses it (a
    head and a worker of one cluster on one machine share the cluster's folder).
    """
    _kill_group(node.process_group)
    kept = [n for n in started_nodes(state_file) if n.process_group != node.process_group]
    if all(n.temp_dir != node.temp_dir for n in kept):
        _remove_folder(node.temp_dir)
    _record(state_file, kept)


def _ensure_token(env: dict[str, str]) -> None:
    """Create a Ray auth token if the machine has none (heads only)."""
    if env.get("RAY_AUTH_TOKEN") or (Path.home() / ".ray" / "auth_token").exists():
        return
    ray = str(_scripts_dir() / "ray")
    done = subprocess.run(
        [ray, "get-auth-token", "--generate"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise CrabrayError(f"cannot create a Ray auth token: {done.stderr.strip()}")


def live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies, dead but unreaped, excluded)."""
    members = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(proc.name))
    return members


def _kill_group(pgid: int) -> None:
    """SIGTERM a process group, then SIGKILL what is left after a grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + _STOP_GRACE_SEC
    while time.monotonic() < deadline:
        if not live_members(pgid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return


def _remove_folder(folder: str | Path | None) -> None:
    """Remove a stopped node's own Ray folder, and its parent once that is empty.

    A folder that cannot be removed is left, with a warning naming it: the node
    is stopped all the same.
    """
    if folder is None:
        return
    path = Path(folder)
    try:
        shutil.rmtree(path, ignore_errors=False)
        if path.parent.name.startswith("crabray-nodes-") and not any(path.parent.iterdir()):
            path.parent.rmdir()
    except FileNotFoundError:
        return
    except OSError as exc:
        logger.warning("could not remove the stopped node's folder %s: %s", path, exc)


def _record(state_file: Path, nodes: list[StartedNode]) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps([n.model_dump() for n in nodes], indent=2))
    os.replace(tmp, state_file)
