"""``rotate due [CREDENTIAL]... [--confirm] [--exit-code] [-o text|json|yaml]`` — what is due.

Without ``--confirm`` (read-only, rotate.engine.due): every named credential (all of them
when none is named), due or not, why (its value's age against ``maxAge``, its ``schedule``)
and when it is next due; when something is due, the two commands that follow — its plan
(``rotate A B``) and ``rotate due --confirm`` — as ``terraform plan`` ends with the apply to
type.  Exit 0 whatever is due (a listing is no failure); ``--exit-code`` makes it 21
(:data:`EXIT_DUE`) when something is due, as ``terraform plan -detailed-exitcode``.

With ``--confirm``: what is due now is rotated as ONE run — ``rotate A --confirm`` for one,
``rotate A B --confirm`` for several (rotate.engine.several) — with that run's progress,
report, journal and exit code; under ``-o json`` its ``run`` document.  Nothing due: the
listing (the ``due`` document), "nothing is due", exit 0 — the CronJob's quiet case.

A backend that cannot be read leaves that credential undecided: it is named with
``rotate doctor`` on stderr and the command exits 3 (:data:`EXIT_PREFLIGHT`), rotating
nothing — a run could not have passed preflight either.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rotate.cli.columns import aligned
from rotate.cli.console import Console, console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Confirm,
    Kubeconfig,
    KubeContext,
    MaxParallel,
    Output,
    OutputOpt,
    ReportFile,
    StateDir,
    TakeOverLock,
    Timeout,
    existing_chain,
    repeat_args,
    state_dir_or_default,
)
from rotate.cli.running import drive
from rotate.cli.state import state_of
from rotate.core.errors import EXIT_DUE, EXIT_OK, EXIT_PREFLIGHT, PreflightFailed
from rotate.core.timestamps import rfc3339
from rotate.engine.options import Options

if TYPE_CHECKING:
    from rotate.engine.due import Due

Credentials = Annotated[list[str] | None, typer.Argument(
    metavar="CREDENTIAL", show_default=False,
    help="Credentials to consider [default: all in the chain file].")]
ExitCode = Annotated[bool, typer.Option(
    "--exit-code", help="Exit 21 when something is due (without --confirm), as "
                        "`terraform plan -detailed-exitcode`.")]


def due(
    ctx: typer.Context,
    credentials: Credentials = None,
    chain: Chain = DEFAULT_CHAIN,
    confirm: Confirm = False,
    exit_code: ExitCode = False,
    output: OutputOpt = Output.text,
    max_parallel: MaxParallel = None,
    timeout: Timeout = None,
    state_dir: StateDir = None,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
    take_over_lock: TakeOverLock = False,
    report_file: ReportFile = None,
) -> None:
    """List what is due for rotation (maxAge, schedule); rotate it as one run with --confirm."""
    console = console_for(ctx, output, report_file)
    chain = existing_chain(ctx, chain)
    engine = state_of(ctx).engine()
    options = Options(chain_file=chain, state_dir=state_dir_or_default(state_dir),
                      max_parallel=max_parallel, timeout=timeout, context=context,
                      kubeconfig=kubeconfig, take_over_lock=take_over_lock)
    found = engine.due(options, tuple(credentials or ()))
    extra = repeat_args(ctx)
    names = _runnable(found)
    undecided = [d for d in found if d.error]
    for d in found:
        if d.due and d.manual:
            console.note(f"{d.credential} is due and takes its value from stdin: "
                         "`rotate due --confirm` leaves it; rotate it with "
                         f"`{_command([d.credential, '--confirm', '--value-stdin'], extra)}`")
    if undecided:
        code = EXIT_PREFLIGHT
    elif any(d.due for d in found) and exit_code and not confirm:
        code = EXIT_DUE
    else:
        code = EXIT_OK
    if confirm and names and not undecided:
        if output is Output.text:
            console.lines(due_lines(found, extra, confirm=True))
        else:
            console.note(f"due: {', '.join(names)}: rotating as one run")
        _rotate(ctx, console, names, options)
    document = due_document(found, code, extra)
    if output is Output.text:
        console.lines(due_lines(found, extra, confirm=confirm))
    else:
        console.document(document)
    for d in undecided:
        console.error(f"{d.credential}: whether it is due is unknown: {d.error}",
                      "check the connection and permissions with `rotate doctor`"
                      + (" (nothing was rotated)" if confirm else ""))
    raise typer.Exit(code)


def _rotate(ctx: typer.Context, console: Console, names: list[str], options: Options) -> None:
    """The run of ``names``: exactly ``rotate NAME… --confirm`` (exits with its code)."""
    engine = state_of(ctx).engine()
    if len(names) == 1:
        operation = (lambda observer, cancel:  # noqa: E731 — one call, two shapes
                     engine.run(options, names[0], observer, cancel))
    else:
        operation = (lambda observer, cancel:  # noqa: E731
                     engine.run_several(options, names, observer, cancel))
    try:
        drive(ctx, console, operation)
    except PreflightFailed as exc:
        from rotate.cli.render_plan import show_plan

        refused = getattr(exc, "plan", None)
        if refused is not None:
            show_plan(console, refused)
        raise


def _command(words: Sequence[str], extra: str) -> str:
    command = " ".join(["rotate", *(shlex.quote(w) for w in words)])
    return f"{command} {extra}" if extra else command


def _runnable(found: Sequence[Due]) -> list[str]:
    """What ``rotate due --confirm`` rotates: the due credentials whose value it makes."""
    return [d.credential for d in found if d.due and not d.manual]


def due_document(found: Sequence[Due], code: int, extra: str) -> dict[str, Any]:
    """The ``due`` document (docs/cli.md)."""
    names = _runnable(found)
    return {"kind": "due", "due": [d.credential for d in found if d.due], "exit_code": code,
            "plan": _command(names, extra) if names else "",
            "command": _command(["due", "--confirm"], extra) if names else "",
            "credentials": [d.to_json() for d in found]}


def _state(d: Due) -> str:
    if d.error:
        return "UNKNOWN"
    if d.due:
        return "DUE"
    return "not due" if d.scheduled else "-"


def _next(d: Due) -> str:
    if d.next_due is None:
        return "never" if not d.error else "?"
    when = rfc3339(d.next_due, micro=False)
    return f"since {when}" if d.due else when


def due_lines(found: Sequence[Due], extra: str, *, confirm: bool) -> list[str]:
    """The listing, then what is due and the commands that follow."""
    lines = aligned([("CREDENTIAL", "DUE", "NEXT DUE", "WHY")]
                    + [(d.credential, _state(d), _next(d), d.reason) for d in found], indent="")
    due_now = [d.credential for d in found if d.due]
    names = _runnable(found)
    lines.append("")
    if not due_now:
        lines.append("Nothing is due.")
    elif confirm and names:
        which = "" if names == due_now else f" {', '.join(names)}"
        lines.append(f"Due: {', '.join(due_now)} — rotating{which} as one run.")
    else:
        lines.append(f"Due: {', '.join(due_now)}.")
    if not names or confirm:
        return lines
    lines += [f"Plan it: {_command(names, extra)}",
              f"Rotate it: {_command(['due', '--confirm'], extra)}"]
    return lines
