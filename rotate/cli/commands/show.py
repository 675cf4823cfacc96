"""``rotate show RUN_ID`` — one run's steps with status and timings (from its journal)."""

from __future__ import annotations

from typing import Annotated

import typer

from rotate.cli.console import console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Output,
    OutputOpt,
    StateDir,
    state_dir_or_default,
)
from rotate.cli.render import show_report
from rotate.cli.state import state_of
from rotate.engine.options import Options


def _complete_run_id(ctx: typer.Context, incomplete: str) -> list[str]:
    from rotate.cli.completion import complete_run_id

    return complete_run_id(ctx, incomplete)


RunId = Annotated[str, typer.Argument(metavar="RUN_ID", show_default=False,
                                      autocompletion=_complete_run_id,
                                      help="A run id from `rotate runs`.")]


def show(
    ctx: typer.Context,
    run_id: RunId,
    output: OutputOpt = Output.text,
    state_dir: StateDir = None,
    chain: Chain = DEFAULT_CHAIN,
) -> None:
    """One run's steps with status and timings. Exits 0: showing a failed run succeeds."""
    console = console_for(ctx, output)
    engine = state_of(ctx).engine()
    options = Options(chain_file=chain, state_dir=state_dir_or_default(state_dir))
    show_report(console, engine.show(options, run_id))
