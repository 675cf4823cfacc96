"""``rotate runs`` — past runs from the journal: id, credential, started, status, failed step."""

from __future__ import annotations

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
from rotate.cli.render import show_runs
from rotate.cli.state import state_of
from rotate.engine.options import Options


def runs(
    ctx: typer.Context,
    output: OutputOpt = Output.text,
    state_dir: StateDir = None,
    chain: Chain = DEFAULT_CHAIN,
) -> None:
    """Past runs from the journal, newest first."""
    console = console_for(ctx, output)
    engine = state_of(ctx).engine()
    options = Options(chain_file=chain, state_dir=state_dir_or_default(state_dir))
    show_runs(console, engine.runs(options))
