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
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from rotate.cli.report_file import check_report_path
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


#: where the journal goes when neither XDG_STATE_HOME nor HOME is set (a container running
#: under an arbitrary UID): the current directory, said on stderr (docs/cli.md "State")
NO_HOME_STATE_DIR = Path(".rotate-state")


def default_state_dir(environ: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The journal location when ``--state-dir``/``ROTATE_STATE_DIR`` is not given, and a
    note for stderr ("" when there is nothing to say).

    XDG: ``$XDG_STATE_HOME/rotate`` (only an absolute XDG_STATE_HOME counts, as the spec
    says), else ``$HOME/.local/state/rotate``. ``Path.home()`` is not used: without HOME it
    consults the password database, which has no entry for the arbitrary UID of a container
    and raises. Without either variable the journal goes to ``./.rotate-state``.
    """
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "rotate", ""
    home = env.get("HOME", "")
    if home and Path(home).is_absolute():
        return Path(home) / ".local" / "state" / "rotate", ""
    return NO_HOME_STATE_DIR, (
        f"note: HOME and XDG_STATE_HOME are not set: the journal is in ./{NO_HOME_STATE_DIR} "
        "(set ROTATE_STATE_DIR or --state-dir to keep it elsewhere)")


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
    help="Journal location (env ROTATE_STATE_DIR) [default: $XDG_STATE_HOME/rotate, "
         "else ~/.local/state/rotate].")]
KubeContext = Annotated[str | None, typer.Option(
    "--context", metavar="NAME", help="Kubeconfig context, as kubectl.")]
Kubeconfig = Annotated[str | None, typer.Option(
    "--kubeconfig", metavar="FILE", help="Kubeconfig file, as kubectl.")]
TakeOverLock = Annotated[bool, typer.Option(
    "--take-over-lock", help="Take the Lease of a run whose holder is gone.")]
ReportFile = Annotated[Path | None, typer.Option(
    "--report-file", metavar="PATH", callback=check_report_path,
    help="Also write the JSON document (run report, plan or error) to PATH (mode 0600), "
         "whatever the outcome.")]

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
    force: bool = False

    def engine_options(self, engine: Any) -> Any:
        """``engine.Options`` (docs/design.md) built from these values. A state directory
        chosen by the no-HOME fallback is said on stderr."""
        state_dir = self.state_dir
        if state_dir is None:
            state_dir, note = default_state_dir()
            if note:
                sys.stderr.write(note + "\n")
        return engine.Options(
            chain_file=self.chain,
            state_dir=state_dir,
            strategy=self.strategy.value if self.strategy is not None else None,
            max_parallel=self.max_parallel,
            timeout=self.timeout,
            context=self.context,
            kubeconfig=self.kubeconfig,
            value_stdin=self.value_stdin,
            take_over_lock=self.take_over_lock,
            **({"force": True} if self.force else {}),
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
