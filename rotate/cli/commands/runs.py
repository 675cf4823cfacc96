"""``rotate runs`` — past runs from the journal: id, credential, started, status, failed step.

A journal that cannot be read (binary, damaged, no permission) never hides the others: the
readable runs are listed, then each unreadable journal is named on stderr (under ``-o json``
also in the document's ``unreadable``), and the command exits 6 (cli.md "Exit codes").
"""

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
from rotate.core.errors import EXIT_JOURNAL_UNREADABLE, JournalUnreadable
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
    unreadable: list[JournalUnreadable] = []
    show_runs(console, engine.runs(options, unreadable=unreadable), unreadable)
    for exc in unreadable:
        console.error(exc.message)
    if unreadable:
        console.err.print(f"hint: {unreadable[0].hint}", markup=False, highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_JOURNAL_UNREADABLE)
