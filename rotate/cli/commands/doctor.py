"""``rotate doctor`` — connectivity and permission checks: backend, cluster, Config Center.

Each failed check names what is missing (a Vault capability, a Kubernetes verb on a
resource, a Config Center scope). Exit 0 when every fatal check passed, 3 otherwise — the
same meaning as a failed preflight: nothing was changed, something must be fixed first.
"""

from __future__ import annotations

import typer

from rotate.cli.console import console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Kubeconfig,
    KubeContext,
    Output,
    OutputOpt,
    StateDir,
    existing_chain,
    state_dir_or_default,
)
from rotate.cli.render import show_doctor
from rotate.cli.state import state_of
from rotate.core.errors import EXIT_OK, EXIT_PREFLIGHT
from rotate.engine.options import Options


def doctor(
    ctx: typer.Context,
    chain: Chain = DEFAULT_CHAIN,
    output: OutputOpt = Output.text,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
    state_dir: StateDir = None,
) -> None:
    """Connectivity and permission checks against the backend, the cluster, the Config Center."""
    console = console_for(ctx, output)
    engine = state_of(ctx).engine()
    options = Options(chain_file=existing_chain(ctx, chain),
                      state_dir=state_dir_or_default(state_dir),
                      context=context, kubeconfig=kubeconfig)
    checks = engine.doctor(options)
    show_doctor(console, checks)
    raise typer.Exit(EXIT_OK if all(c.ok or not c.fatal for c in checks) else EXIT_PREFLIGHT)
