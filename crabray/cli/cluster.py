"""``crabray cluster``: stand up, inspect and stop the Ray nodes that host sandboxes."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from crabray.cli.terminal import console, print_copyable
from crabray.core.errors import CrabrayError
from crabray.core.words import counted

cluster_app = typer.Typer(
    help="Start, inspect and stop the Ray nodes that host crabray sandboxes.",
    no_args_is_help=True,
    epilog="""Examples:

  crabray cluster local --nodes 3 --hosts local=2     # a head and two workers here

  crabray cluster status

  crabray cluster stop
""",
)

HostsOpt = Annotated[
    str | None,
    typer.Option(help="What this node hosts: KIND=SLOTS,... e.g. docker=8,vm=2."),
]
LabelsOpt = Annotated[
    str | None, typer.Option(help="Extra node labels: KEY=VALUE,... e.g. crabray-image=ubuntu.")
]
NodeConfigOpt = Annotated[
    Path | None,
    typer.Option("--node-config", help="Node config TOML (see cluster/node.example.toml)."),
]
CpusOpt = Annotated[int | None, typer.Option(min=1, help="CPUs Ray may schedule on the node.")]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        help="Where started nodes are recorded (default $CRABRAY_NODES_FILE or "
        "~/.crabray/nodes.json)."
    ),
]


def _state(path: Path | None) -> Path:
    from crabray.cluster.runtime.nodes import DEFAULT_STATE_FILE

    return path or DEFAULT_STATE_FILE


@cluster_app.command(
    "start-head",
    epilog="""Examples:

  crabray cluster start-head --hosts docker=8

  crabray cluster start-head --node-config cluster/node.example.toml --port 6380

  crabray cluster start-head --node-ip-address 10.0.0.5   # the address workers reach
""",
)
def start_head(
    hosts: HostsOpt = None,
    labels: LabelsOpt = None,
    config: NodeConfigOpt = None,
    num_cpus: CpusOpt = None,
    port: Annotated[int, typer.Option(help="Port of the head's GCS.")] = 6379,
    node_ip_address: Annotated[
        str | None,
        typer.Option(
            help="The address the head advertises and workers join at "
            "(default: this machine's address on its default route)."
        ),
    ] = None,
    state_file: StateOpt = None,
    dashboard_port: Annotated[
        int, typer.Option(help="Port of Ray's dashboard, the Job Submission API runs go to.")
    ] = 8265,
    job_agent_port: Annotated[
        int, typer.Option(help="Port of the head's job agent, which runs submitted jobs.")
    ] = 52365,
    ready_timeout_sec: Annotated[
        float, typer.Option(help="How long the job agent gets to answer before start-head fails.")
    ] = 60.0,
) -> None:
    """Start the head node of a crabray cluster on this machine.

    It reports success only once Ray's Job Submission API and the head's job agent
    answer (within a minute); otherwise it stops the head and fails, saying which.
    """
    from crabray.cluster.runtime.nodes import (
        DashboardPorts,
        has_dashboard,
        node_config,
        routable_address,
        start_node,
        stop_node,
        wait_for_job_agent,
    )

    ip = node_ip_address or routable_address()
    ports = DashboardPorts(dashboard=dashboard_port, agent=job_agent_port)
    node = start_node(
        node_config(hosts, labels, config, num_cpus),
        head_port=port,
        node_ip=ip,
        state_file=_state(state_file),
        dashboard=ports,
    )
    if has_dashboard():
        try:
            wait_for_job_agent(ports, ready_timeout_sec)
        except CrabrayError as exc:
            stop_node(node, _state(state_file))
            raise CrabrayError(f"{exc}. The head was stopped.") from exc
    print_copyable(f"head node started at {ip}:{port}; it hosts {node.hosts or 'no sandboxes'}")
    if ip.startswith("127."):
        console.print(
            f"[yellow]warning:[/] {ip} is a loopback address: only this machine can join; "
            "give --node-ip-address with an address the workers can reach",
            soft_wrap=True,
        )
    print_copyable(
        f"join workers with:  crabray cluster start-worker --address {ip}:{port} --hosts ..."
    )
    print_copyable("workers need this machine's Ray token (~/.ray/auth_token, or RAY_AUTH_TOKEN)")
    print_copyable(
        f"run sweeps with:    crabray run SUITE --agent NAME --address http://{ip}:{dashboard_port}"
    )
    print_copyable("(from any machine holding the token; see cluster/README.md)")
    print_copyable(f"Ray's logs:         {node.temp_dir}/session_latest/logs")


@cluster_app.command(
    "start-worker",
    epilog="""Examples:

  crabray cluster start-worker --address 10.0.0.5:6379 --hosts docker=8,vm=2

  RAY_ADDRESS=10.0.0.5:6379 crabray cluster start-worker --hosts docker=8
""",
)
def start_worker(
    address: Annotated[
        str,
        typer.Option(envvar="RAY_ADDRESS", help="The head's address, HOST:PORT."),
    ],
    hosts: HostsOpt = None,
    labels: LabelsOpt = None,
    config: NodeConfigOpt = None,
    num_cpus: CpusOpt = None,
    state_file: StateOpt = None,
) -> None:
    """Start a worker node on this machine and join it to the cluster at ADDRESS."""
    from crabray.cluster.runtime.nodes import node_config, start_node

    node = start_node(
        node_config(hosts, labels, config, num_cpus),
        address=address,
        state_file=_state(state_file),
    )
    console.print(f"worker joined {address}; it hosts {node.hosts or 'no sandboxes'}")


@cluster_app.command(
    "local",
    epilog="""Examples:

  crabray cluster local                         # a head and one worker hosting local=4

  crabray cluster local --nodes 3 --hosts local=2

Then: crabray cluster status; crabray run SUITE -a NAME --address ADDRESS; crabray cluster stop
""",
)
def local(
    nodes: Annotated[int, typer.Option(min=1, help="Nodes to start on this machine.")] = 2,
    hosts: HostsOpt = "local=4",
    labels: LabelsOpt = None,
    num_cpus: Annotated[int, typer.Option(min=1, help="CPUs each node advertises.")] = 1,
    port: Annotated[int, typer.Option(help="Port of the head's GCS (0: pick a free one).")] = 0,
    state_file: StateOpt = None,
) -> None:
    """Start an N-node cluster on this machine, for development and tests.

    The head hosts no sandboxes; each of the other nodes hosts HOSTS, so
    episodes spread over several nodes as they would on a real cluster.
    """
    from crabray.cluster.runtime.nodes import NodeConfig, node_config, start_node, start_workers

    chosen = port or _free_port()
    head = start_node(
        NodeConfig(num_cpus=num_cpus), head_port=chosen, state_file=_state(state_file)
    )
    worker = node_config(hosts, labels, None, num_cpus)
    start_workers(worker, max(nodes - 1, 1), address=head.address, state_file=_state(state_file))
    print_copyable(f"local cluster of {max(nodes, 2)} nodes at {head.address}")
    print_copyable(f"run sweeps with:  crabray run SUITE --agent NAME --address {head.address}")
    print_copyable(f"             or:  export RAY_ADDRESS={head.address}; crabray run SUITE ...")
    print_copyable("look at it with:  crabray cluster status")
    print_copyable("stop it with:     crabray cluster stop")


@cluster_app.command(
    "status",
    epilog="""Examples:

  crabray cluster status                        # the cluster started here (crabray cluster local)

  crabray cluster status --address 10.0.0.5:6379

  crabray cluster status --address http://10.0.0.5:8265   # from a machine that is no node
""",
)
def status(
    address: Annotated[
        str | None,
        typer.Option(
            envvar="RAY_ADDRESS",
            help="The cluster's address, HOST:PORT, or its head's Job Submission API, "
            "http://HEAD:8265; the head crabray started on this machine when omitted.",
        ),
    ] = None,
    state_file: StateOpt = None,
) -> None:
    """List the cluster's nodes with their sandbox slots in use, and runs in progress."""
    from crabray.cluster.runtime.submit import is_job_address
    from crabray.cluster.runtime.token_auth import use_token_auth

    if is_job_address(address):
        _status_through_job(str(address))
        return
    address = address or _started_head(_state(state_file))
    use_token_auth(
        address, _state(state_file)
    )  # before Ray is imported: Ray reads RAY_AUTH_MODE then
    from crabray.cluster.runtime.ray_runtime import connect
    from crabray.cluster.sweep.status import node_statuses, run_statuses

    connect(address)
    nodes, runs = node_statuses(), run_statuses()
    table = Table(title=f"nodes of {address}")
    for column in ("node", "address", "alive", "hosts (in use / slots)", "labels"):
        table.add_column(column)
    for node in nodes:
        slots = ", ".join(f"{k} {node.in_use.get(k, 0)}/{n}" for k, n in sorted(node.slots.items()))
        labels = ", ".join(f"{k}={v}" for k, v in sorted(node.labels.items()))
        table.add_row(
            node.node_id[:8], node.address, "yes" if node.alive else "DEAD", slots, labels
        )
    console.print(table)
    if runs:
        runs_table = Table(title="runs")
        for column in ("run id", "done", "ok", "in flight", "retries", "infra failures"):
            runs_table.add_column(column)
        for run in runs:
            runs_table.add_row(
                run.run_id,
                f"{run.done}/{run.total}",
                str(run.successes),
                str(run.in_flight),
                str(run.retries),
                str(run.infra_failures),
            )
        console.print(runs_table)


def _status_through_job(address: str) -> None:
    """Show ``crabray cluster status`` as run on the head, through a Ray job.

    A machine that is no node of the cluster cannot join it as a Ray driver; the
    head's Job Submission API runs the command there (its ``RAY_ADDRESS`` is the
    cluster's) and hands back what it printed, at this terminal's width.
    """
    import secrets

    from crabray.cluster.runtime.submit import delete, job_client, job_output

    client = job_client(address)
    begin = f"crabray-status-{secrets.token_hex(4)}"
    job_id = client.submit_job(
        entrypoint=f"echo {begin}; COLUMNS={console.width} crabray cluster status",
        submission_id=begin,
    )
    output = job_output(client, job_id)
    delete(client, job_id)
    # The job's output follows its marker line; Ray's own lines about the job (a
    # "Running entrypoint" line may come after the marker) are dropped.
    _, found, printed = output.partition(f"{begin}\n")
    if not found:
        raise CrabrayError(f"the status job printed no status:\n{output.strip()[-2000:]}")
    ray_line = f"Running entrypoint for job {job_id}"
    shown = [line for line in printed.splitlines() if not line.startswith(ray_line)]
    console.out("\n".join(shown), highlight=False)


@cluster_app.command(
    "stop",
    epilog="""Example:

  crabray cluster stop
""",
)
def stop(state_file: StateOpt = None) -> None:
    """Stop the nodes crabray started on this machine (and no other Ray instance)."""
    from crabray.cluster.runtime.nodes import stop_nodes

    stopped = stop_nodes(_state(state_file))
    console.print(
        f"stopped {counted(len(stopped), 'node')}" if stopped else "no nodes were started here"
    )


def _started_head(state_file: Path) -> str:
    """The address of the head node crabray started on this machine, for commands given none."""
    from crabray.cluster.runtime.nodes import started_nodes

    heads = [node.address for node in started_nodes(state_file) if node.role == "head"]
    if not heads:
        raise CrabrayError(
            "no cluster address: give --address HOST:PORT or set RAY_ADDRESS, or start a cluster "
            f"on this machine with `crabray cluster local` (none is recorded in {state_file})"
        )
    return heads[-1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
