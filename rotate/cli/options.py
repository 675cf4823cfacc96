"""Option definitions shared by the commands (cli.md "Options").

Every option is declared once here as an ``Annotated`` alias so that `rotate CREDENTIAL`,
`resume`, `rollback`, `doctor`… spell, document and validate it identically. Bad values are
click usage errors (exit 2) at parse time — a bad ``--timeout`` never reaches the engine.

The commands build the engine's :class:`~rotate.engine.options.Options` from these values
themselves (a module of core types only, so start-up stays cheap); ``--strategy`` is typed
with the one :class:`~rotate.core.strategy.Strategy` the engine and the chain file use.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from rotate.cli.report_file import check_report_path
from rotate.core.durations import parse_duration
from rotate.core.errors import UsageError
from rotate.core.strategy import Strategy


class Output(StrEnum):
    text = "text"
    json = "json"
    yaml = "yaml"  # the JSON document as YAML, field for field (rotate.cli.yaml_text)


def _duration(text: str) -> float:
    """A positive duration: a deadline of 0 would fail every step at once (and a negative
    one is not a duration), so both are refused at parse time."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        # parse_duration's message names only the operator's own input.
        raise typer.BadParameter(str(exc)) from None
    if seconds <= 0:
        raise typer.BadParameter(f"must be more than 0, e.g. 90s, 5m, 1h30m (got {text!r})")
    return seconds


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
    help="json or yaml: one document on stdout (the same fields in both), nothing else on "
         "stdout.")]
ValueStdin = Annotated[bool, typer.Option(
    "--value-stdin", help="Read the new value from stdin instead of generating it.")]
StrategyOpt = Annotated[Strategy | None, typer.Option(
    "--strategy", case_sensitive=False, help="Override the chain file's strategy.")]
MaxParallel = Annotated[int | None, typer.Option(
    "--max-parallel", metavar="N", min=1, help="Consumer rollouts at once.")]
Timeout = Annotated[float | None, typer.Option(
    "--timeout", metavar="DURATION", parser=_duration,
    help="Per-step deadline override (more than 0), e.g. 90s, 5m.")]
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


def state_dir_or_default(state_dir: Path | None) -> Path:
    """``--state-dir``/``ROTATE_STATE_DIR`` when given, else :func:`default_state_dir`; a
    state directory chosen by the no-HOME fallback is said on stderr."""
    if state_dir is not None:
        return state_dir
    chosen, note = default_state_dir()
    if note:
        sys.stderr.write(note + "\n")
    return chosen


#: ctx.meta key: the chain file a command hands the engine, and where its path came from
CHAIN_KEY = "rotate.chain"


def existing_chain(ctx: Any, chain: Path) -> Path:
    """``chain``, remembered (with where its path came from: ``--chain``, ``ROTATE_CHAIN`` or
    the default) so that a chain file error the engine raises for a file that is not there
    reads as :func:`missing_chain` says, not as an "invalid chain file"."""
    source = getattr(ctx.get_parameter_source("chain"), "name", "")
    given = {"COMMANDLINE": "given with --chain", "ENVIRONMENT": "given with ROTATE_CHAIN"}
    ctx.meta[CHAIN_KEY] = (chain, given.get(source, "the default: neither --chain nor "
                                                    "ROTATE_CHAIN is set"))
    return chain


def missing_chain(meta: Mapping[str, Any]) -> UsageError | None:
    """When the remembered chain file is not there: a UsageError (exit 2) saying it is
    missing, the absolute path looked for, where the path came from and how to name one;
    else None (what is there is the loader's to judge: not a regular file, not readable,
    not valid)."""
    recorded = meta.get(CHAIN_KEY)
    if recorded is None:
        return None
    chain, why = recorded
    try:
        os.stat(chain)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError:
        return None
    else:
        return None
    return UsageError(
        f"no chain file at {chain} ({why}; looked for {Path.cwd() / chain})",
        hint="name the chain file with --chain FILE or ROTATE_CHAIN=FILE (options may come "
             "before or after the credential), or draft one from the cluster with "
             "`rotate init`")


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
