"""Option definitions shared by the commands (cli.md "Options"), and the engine Options.

Every option is declared once here as an ``Annotated`` alias so that `rotate CREDENTIAL`,
`resume`, `rollback`, `doctor`… spell, document and validate it identically. Bad values are
click usage errors (exit 2) at parse time — a bad ``--timeout`` never reaches the engine.

Nothing here imports the engine: :func:`engine_options` builds the engine's ``Options``
through the facade handed in, so the CLI stays cheap to start and testable with a fake.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from rotate.core.durations import parse_duration


class Output(StrEnum):
    text = "text"
    json = "json"


class Strategy(StrEnum):
    restart = "restart"
    overlap = "overlap"


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        # parse_duration's message names only the operator's own input.
        raise typer.BadParameter(str(exc)) from None


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/rotate``, falling back to ``~/.local/state/rotate`` (XDG spec)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rotate"


Chain = Annotated[Path, typer.Option(
    "--chain", envvar="ROTATE_CHAIN", metavar="FILE", show_envvar=False,
    help="Chain file (env ROTATE_CHAIN).")]
Confirm = Annotated[bool, typer.Option("--confirm", help="Actually change things.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Plan only (the default).")]
OutputOpt = Annotated[Output, typer.Option(
    "-o", "--output", case_sensitive=False,
    help="json: one JSON document on stdout, nothing else on stdout.")]
ValueStdin = Annotated[bool, typer.Option(
    "--value-stdin", help="Read the new value from stdin instead of generating it.")]
StrategyOpt = Annotated[Strategy | None, typer.Option(
    "--strategy", case_sensitive=False, help="Override the chain file's strategy.")]
MaxParallel = Annotated[int | None, typer.Option(
    "--max-parallel", metavar="N", min=1, help="Consumer rollouts at once.")]
Timeout = Annotated[float | None, typer.Option(
    "--timeout", metavar="DURATION", parser=_duration,
    help="Per-step deadline override, e.g. 90s, 5m.")]
StateDir = Annotated[Path | None, typer.Option(
    "--state-dir", envvar="ROTATE_STATE_DIR", metavar="DIR", show_envvar=False,
    help="Journal location (env ROTATE_STATE_DIR) [default: $XDG_STATE_HOME/rotate].")]
KubeContext = Annotated[str | None, typer.Option(
    "--context", metavar="NAME", help="Kubeconfig context, as kubectl.")]
Kubeconfig = Annotated[str | None, typer.Option(
    "--kubeconfig", metavar="FILE", help="Kubeconfig file, as kubectl.")]
TakeOverLock = Annotated[bool, typer.Option(
    "--take-over-lock", help="Take the Lease of a run whose holder is gone.")]

DEFAULT_CHAIN = Path("rotate.yaml")


@dataclass(frozen=True)
class Common:
    """The options a command collected, before they become the engine's Options."""

    chain: Path = DEFAULT_CHAIN
    state_dir: Path | None = None
    strategy: Strategy | None = None
    max_parallel: int | None = None
    timeout: float | None = None
    context: str | None = None
    kubeconfig: str | None = None
    value_stdin: bool = False
    take_over_lock: bool = False

    def engine_options(self, engine: Any) -> Any:
        """``engine.Options`` (docs/design.md) built from these values."""
        return engine.Options(
            chain_file=self.chain,
            state_dir=self.state_dir if self.state_dir is not None else default_state_dir(),
            strategy=self.strategy.value if self.strategy is not None else None,
            max_parallel=self.max_parallel,
            timeout=self.timeout,
            context=self.context,
            kubeconfig=self.kubeconfig,
            value_stdin=self.value_stdin,
            take_over_lock=self.take_over_lock,
        )


def plan_or_confirm(confirm: bool, dry_run: bool) -> bool:
    """True to change things. ``--confirm --dry-run`` together is a usage error."""
    if confirm and dry_run:
        raise typer.BadParameter("--confirm and --dry-run contradict each other",
                                 param_hint="'--confirm'")
    return confirm


#: options a follow-up command (resume, rollback) needs to find the same run and cluster
_REPEATED = (("chain", "--chain"), ("state_dir", "--state-dir"), ("context", "--context"),
             ("kubeconfig", "--kubeconfig"))


def repeat_args(ctx: Any) -> str:
    """The location options the operator typed, to append to the printed resume/rollback
    commands so they are exact. Values from the environment are not repeated: the same
    shell still has them."""
    parts: list[str] = []
    for name, flag in _REPEATED:
        source = ctx.get_parameter_source(name)
        value = ctx.params.get(name)
        if value is not None and getattr(source, "name", "") == "COMMANDLINE":
            parts += [flag, shlex.quote(str(value))]
    return " ".join(parts)
