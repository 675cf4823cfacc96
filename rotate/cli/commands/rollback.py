"""``rotate rollback RUN_ID --confirm`` — restore the values a run replaced, through the chain.

Without ``--confirm`` nothing is changed: the run as journaled is shown, with the command
that would roll it back.
"""

from __future__ import annotations

import typer

from rotate.cli.commands.show import RunId
from rotate.cli.console import console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Common,
    Confirm,
    DryRun,
    Kubeconfig,
    KubeContext,
    MaxParallel,
    Output,
    OutputOpt,
    StateDir,
    TakeOverLock,
    Timeout,
    plan_or_confirm,
)
from rotate.cli.render import show_report
from rotate.cli.running import drive
from rotate.cli.state import state_of


def rollback(
    ctx: typer.Context,
    run_id: RunId,
    confirm: Confirm = False,
    dry_run: DryRun = False,
    chain: Chain = DEFAULT_CHAIN,
    output: OutputOpt = Output.text,
    max_parallel: MaxParallel = None,
    timeout: Timeout = None,
    state_dir: StateDir = None,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
    take_over_lock: TakeOverLock = False,
) -> None:
    """Restore the values a run replaced, through the whole chain."""
    console = console_for(ctx, output)
    change = plan_or_confirm(confirm, dry_run)
    engine = state_of(ctx).engine()
    options = Common(chain=chain, state_dir=state_dir, max_parallel=max_parallel,
                     timeout=timeout, context=context, kubeconfig=kubeconfig,
                     take_over_lock=take_over_lock).engine_options(engine)
    if not change:
        show_report(console, engine.show(options, run_id))
        console.note(f"Nothing was changed. To rollback it: rotate rollback {run_id} --confirm")
        raise typer.Exit(0)
    drive(ctx, console, lambda observer, cancel: engine.rollback(options, run_id, observer, cancel))
