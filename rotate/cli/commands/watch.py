"""``rotate watch`` — the long-running watcher (docs/cli.md, docs/in-cluster.md).

Runs until SIGTERM/SIGINT (exit 0): leader-elected through Lease ``rotate-watch``, it adopts
what the backend holds when a target Secret changes outside any rotate run and resumes the
runs a killed leader left (rotate.engine.watcher).  Each run is a child ``rotate`` process
with this command's ``--chain``/``--state-dir``/``--context``/``--kubeconfig``.
"""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime
from typing import Annotated

import typer

from rotate.cli.console import console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Kubeconfig,
    KubeContext,
    StateDir,
    state_dir_or_default,
)
from rotate.cli.state import state_of
from rotate.core.errors import UsageError
from rotate.engine.options import Options

Listen = Annotated[str, typer.Option(
    "--listen", metavar="HOST:PORT",
    help="Where /metrics, /healthz and /readyz are served (0.0.0.0:8080 in a pod).")]
LeaseSeconds = Annotated[int, typer.Option(
    "--lease-seconds", min=2, max=300, help="Leader Lease duration: a dead leader is "
    "replaced this many seconds after its last renewal.")]
Resync = Annotated[float, typer.Option(
    "--resync", min=1, help="Seconds between two looks at every credential (what changed "
    "while no watcher ran, a missed event).")]


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise UsageError(f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:8080)")
    return host.strip("[]"), int(port)


Credentials = Annotated[list[str] | None, typer.Argument(
    metavar="CREDENTIAL", show_default=False,
    help="Credentials to watch [default: all in the chain file].")]


def watch(
    ctx: typer.Context,
    credentials: Credentials = None,
    chain: Chain = DEFAULT_CHAIN,
    listen: Listen = "127.0.0.1:8080",
    lease_seconds: LeaseSeconds = 15,
    resync: Resync = 300.0,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
    state_dir: StateDir = None,
) -> None:
    """Watch the target Secrets: adopt changes made outside rotate, resume a dead leader's run."""
    from rotate.engine.watch_service import WatchSettings

    console = console_for(ctx)
    host, port = _listen(listen)
    state = state_dir_or_default(state_dir)
    options = Options(chain_file=chain, state_dir=state, context=context,
                      kubeconfig=kubeconfig)
    child = ["--chain", str(chain), "--state-dir", str(state)]
    child += ["--context", context] if context else []
    child += ["--kubeconfig", kubeconfig] if kubeconfig else []
    stop = threading.Event()

    def _stop(_signum: int, _frame: object) -> None:
        stop.set()

    def log(text: str) -> None:
        console.note(f"{datetime.now(UTC):%H:%M:%S} watch: {text}")

    settings = WatchSettings(host=host, port=port, lease_seconds=lease_seconds, resync=resync)
    before = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        state_of(ctx).engine().watch(options, tuple(credentials or ()), settings, stop, child,
                                     log)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    log("stopped")
