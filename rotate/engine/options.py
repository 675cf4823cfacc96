"""What the operator chose on the command line, as the engine takes it (docs/design.md
"Engine ↔ CLI contract").

Its own module, importing only :mod:`rotate.core`, so that the CLI builds it directly at
start-up without importing the rest of the engine (``rotate --help`` imports no engine:
bench/startup.py).  :mod:`rotate.engine.model` re-exports it with the other engine data.

Invariant: every field is read by the engine; what only the CLI needs (``--value-stdin``,
``-o``, ``--report-file``) stays in the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rotate.core.strategy import Strategy


@dataclass(frozen=True)
class Options:
    """The options of one command; ``None`` is "as the chain file says"."""

    chain_file: Path
    state_dir: Path
    strategy: Strategy | None = None
    max_parallel: int | None = None
    timeout: float | None = None
    context: str | None = None
    kubeconfig: str | None = None
    take_over_lock: bool = False
    #: rollback: overwrite what moved since the run; rotate: start although the
    #: credential's last run is unfinished (cli.md)
    force: bool = False
    #: rotate: carry the value the backend holds now (one no rotate run wrote) through the
    #: chain instead of writing a new one (cli.md "--adopt")
    adopt: bool = False
