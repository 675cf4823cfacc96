"""The commands that act on a journaled run: ``rotate resume`` and ``rotate rollback``.

Both take the same RUN_ID and options, show the run as journaled without ``--confirm``
(nothing changed, the exact command that would act printed), and drive one engine call
with ``--confirm``; :func:`journaled_command` builds each from its verb and engine call,
so the two cannot drift apart in options, messages or exit codes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from rotate.cli.commands.rotate_cmd import read_value_stdin
from rotate.cli.commands.show import RunId
from rotate.cli.console import console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Confirm,
    DryRun,
    Kubeconfig,
    KubeContext,
    MaxParallel,
    Output,
    OutputOpt,
    ReportFile,
    StateDir,
    TakeOverLock,
    Timeout,
    ValueStdin,
    existing_chain,
    plan_or_confirm,
    repeat_args,
    state_dir_or_default,
)
from rotate.cli.render import show_report
from rotate.cli.running import drive
from rotate.cli.state import state_of
from rotate.engine.options import Options

if TYPE_CHECKING:
    from rotate.cli.state import Engine
    from rotate.core.secret import Secret
    from rotate.core.waiting import CancelToken
    from rotate.engine.model import Observer, RunReport

#: (engine, options, run id, observer, cancel, value from stdin or None) → the report
EngineCall = Callable[["Engine", Options, str, "Observer", "CancelToken", "Secret | None"],
                      "RunReport"]

#: what acting on the run is called, after "To …:" ("rollback" is the noun)
_ACT = {"resume": "resume it", "rollback": "roll it back"}

Force = Annotated[bool, typer.Option(
    "--force", help="Roll back even though what it restores moved since the run (a later "
                    "run, a Config Center edit): those changes are overwritten.")]


def journaled_command(
    verb: str, summary: str, call: EngineCall, *, takes: tuple[str, ...] = (),
) -> Callable[..., None]:
    """The typer command ``rotate VERB RUN_ID [--confirm]``; ``summary`` is its help line;
    ``takes``: which of the optional ``value_stdin`` (resume) and ``force`` (rollback)
    options the verb has (the others are left out of its signature, hence of its help)."""

    def command(
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
        report_file: ReportFile = None,
        value_stdin: ValueStdin = False,
        force: Force = False,
    ) -> None:
        console = console_for(ctx, output, report_file)
        change = plan_or_confirm(confirm, dry_run)
        engine = state_of(ctx).engine()
        options = Options(chain_file=chain, state_dir=state_dir_or_default(state_dir),
                          max_parallel=max_parallel, timeout=timeout, context=context,
                          kubeconfig=kubeconfig, take_over_lock=take_over_lock, force=force)
        if not change:
            show_report(console, engine.show(options, run_id))
            again = " ".join(p for p in (f"rotate {verb} {run_id} --confirm",
                                         repeat_args(ctx)) if p)
            console.note(f"Nothing was changed. To {_ACT[verb]}: {again}")
            raise typer.Exit(0)
        existing_chain(ctx, chain)  # resume and rollback load it (show does not)
        value = read_value_stdin(run_id) if value_stdin else None
        drive(ctx, console,
              lambda observer, cancel: call(engine, options, run_id, observer, cancel, value))

    sig = inspect.signature(command, eval_str=True)
    optional = {"value_stdin", "force"}
    command.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[p for p in sig.parameters.values()
                    if p.name not in optional or p.name in takes])
    command.__doc__ = summary
    command.__name__ = command.__qualname__ = verb
    return command
