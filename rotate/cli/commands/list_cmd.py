"""``rotate list`` — the chain file's credentials, their provider(s), consumers, last run.

Reads the chain file and the journal only: no backend, no cluster. It must stay cheap (no
kubernetes/hvac import), which is the engine's promise for ``list_credentials``.
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
    existing_chain,
    state_dir_or_default,
)
from rotate.cli.render import show_list
from rotate.cli.state import state_of
from rotate.engine.options import Options


def list_credentials(
    ctx: typer.Context,
    chain: Chain = DEFAULT_CHAIN,
    output: OutputOpt = Output.text,
    state_dir: StateDir = None,
) -> None:
    """The credentials in the chain file: provider(s), consumers, last run."""
    console = console_for(ctx, output)
    engine = state_of(ctx).engine()
    options = Options(chain_file=existing_chain(ctx, chain),
                      state_dir=state_dir_or_default(state_dir))
    show_list(console, engine.list_credentials(options))
