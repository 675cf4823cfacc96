"""``rotate CREDENTIAL [--confirm]`` — plan (the default) or run the whole chain.

Without ``--confirm`` nothing is changed: the engine runs preflight and returns the ordered
steps; exit 0 when preflight passed, 3 when it did not (cli.md). With ``--confirm`` the
engine runs the chain; the CLI exits with the report's code (0, 5, 10–16, 130).

``--adopt`` carries the value the backend holds now (one no rotate run wrote) instead of a
new one (rotate.engine.adoption); when the backend holds the chain's value there is nothing
to do: the plan says so and the command exits 0, with or without ``--confirm``.

``--value-stdin`` reads the new value from stdin — never from argv, where ``ps`` and shell
history would see it. On a terminal it is read without echo. The value goes straight into a
:class:`~rotate.core.secret.Secret`; an empty, non-UTF-8, oversized value or one with control
characters is refused with exit 2 before the engine is called (rotate.core.supplied).
"""

from __future__ import annotations

import getpass
import sys
from typing import Annotated

import typer

from rotate.cli.console import Console, console_for
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
    StrategyOpt,
    TakeOverLock,
    Timeout,
    ValueStdin,
    existing_chain,
    plan_or_confirm,
    state_dir_or_default,
)
from rotate.cli.render_plan import show_plan
from rotate.cli.running import drive
from rotate.cli.state import state_of
from rotate.core import supplied
from rotate.core.errors import (
    EXIT_OK,
    EXIT_PREFLIGHT,
    NothingToAdopt,
    PreflightFailed,
    UsageError,
)
from rotate.core.secret import Secret
from rotate.core.supplied import strip_line_end
from rotate.engine.options import Options

ForceStart = Annotated[bool, typer.Option(
    "--force", help="Start although the credential's last run is unfinished (it failed or "
                    "was interrupted after changing something); that run can then no longer "
                    "be resumed.")]
Adopt = Annotated[bool, typer.Option(
    "--adopt", help="Carry the value the backend holds now, which no rotate run wrote (a "
                    "`bao kv put` by hand), through the chain instead of a new value: no new "
                    "version. Nothing to adopt is a no-op (exit 0).")]
Credential = Annotated[str, typer.Argument(
    metavar="CREDENTIAL", show_default=False, help="A credential name from the chain file.")]


def read_value_stdin(credential: str) -> Secret:
    """One line from stdin (line end stripped) as a Secret, checked by
    :func:`rotate.core.supplied.accept` (UTF-8, not empty, no control characters, size) —
    at most one byte over the limit is read, so a huge stream cannot exhaust memory.

    Exactly one line: anything after the first line end (a second line, an empty one) is
    refused (exit 2) rather than silently dropped — a value split over two lines would
    otherwise be rotated as its first half.  One byte past the line end is read to know."""
    stream = sys.stdin
    if stream is None:
        raise UsageError("--value-stdin: there is no stdin to read from")
    if stream.isatty():
        typed = getpass.getpass(f"new value for {credential} (not echoed): ", stream=sys.stderr)
        raw = typed.encode("utf-8", "surrogateescape")
    else:
        buffer = getattr(stream, "buffer", None)
        limit = supplied.MAX_VALUE_BYTES + 3  # the value, one byte over, and "\r\n"
        if buffer is not None:
            line = buffer.readline(limit)
            more = buffer.read(1) if line.endswith(b"\n") else b""
        else:
            line = stream.readline(limit).encode("utf-8", "surrogateescape")
            more = stream.read(1).encode("utf-8", "surrogateescape") \
                if line.endswith(b"\n") else b""
        if more:
            raise UsageError("--value-stdin takes exactly one line, and stdin holds more than "
                             "one (nothing may follow the value's line end)",
                             hint="give the value on one line, ended by at most one newline")
        raw = strip_line_end(line)
    return supplied.accept(raw)


def rotate(
    ctx: typer.Context,
    credential: Credential,
    chain: Chain = DEFAULT_CHAIN,
    confirm: Confirm = False,
    dry_run: DryRun = False,
    output: OutputOpt = Output.text,
    value_stdin: ValueStdin = False,
    strategy: StrategyOpt = None,
    max_parallel: MaxParallel = None,
    timeout: Timeout = None,
    state_dir: StateDir = None,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
    take_over_lock: TakeOverLock = False,
    report_file: ReportFile = None,
    force: ForceStart = False,
    adopt: Adopt = False,
) -> None:
    """Plan the rotation of CREDENTIAL (changes nothing), or run it with --confirm."""
    # Further words are further credentials, one run of them all (docs/chain.md "Several
    # credentials in one run"); the command takes them as extra arguments, so that its help
    # and a one-credential run stay exactly as they were.
    credentials = [credential, *ctx.args]
    console = console_for(ctx, output, report_file)
    change = plan_or_confirm(confirm, dry_run)
    chain = existing_chain(ctx, chain)
    if adopt and value_stdin:
        raise UsageError("--adopt carries the value the backend holds; --value-stdin gives "
                         "another: use one of them")
    if len(credentials) > 1:
        if adopt:
            raise UsageError("--adopt carries one credential's backend value: name one "
                             "credential")
        _several(ctx, console, credentials, change, value_stdin, Options(
            chain_file=chain, state_dir=state_dir_or_default(state_dir), strategy=strategy,
            max_parallel=max_parallel, timeout=timeout, context=context,
            kubeconfig=kubeconfig, take_over_lock=take_over_lock, force=force))
        return
    new_value = read_value_stdin(credential) if (change and value_stdin) else None
    engine = state_of(ctx).engine()
    options = Options(chain_file=chain, state_dir=state_dir_or_default(state_dir),
                      strategy=strategy, max_parallel=max_parallel, timeout=timeout,
                      context=context, kubeconfig=kubeconfig, take_over_lock=take_over_lock,
                      force=force, adopt=adopt)
    if not change:
        plan = engine.plan(options, credential)
        show_plan(console, plan)
        raise typer.Exit(EXIT_OK if plan.ok else EXIT_PREFLIGHT)
    try:
        drive(ctx, console, lambda observer, cancel: engine.run(
            options, credential, observer, cancel, new_value=new_value))
    except NothingToAdopt as exc:  # the backend holds the chain's value: a success
        show_plan(console, exc.plan)  # type: ignore[attr-defined]
        raise typer.Exit(EXIT_OK) from None
    except PreflightFailed as exc:
        # The engine may attach the plan it refused, so the operator sees which check failed.
        refused = getattr(exc, "plan", None)
        if refused is not None:
            show_plan(console, refused)
        raise


def _several(ctx: typer.Context, console: Console, credentials: list[str], change: bool,
             value_stdin: bool, options: Options) -> None:
    """``rotate A B …``: the plan, or the run, of several credentials as one
    (rotate.engine.several)."""
    if value_stdin:
        raise UsageError("--value-stdin gives one credential its value: rotate that "
                         "credential alone")
    engine = state_of(ctx).engine()
    if not change:
        plan = engine.plan_several(options, credentials)
        show_plan(console, plan)
        raise typer.Exit(EXIT_OK if plan.ok else EXIT_PREFLIGHT)
    try:
        drive(ctx, console, lambda observer, cancel: engine.run_several(
            options, credentials, observer, cancel))
    except PreflightFailed as exc:
        refused = getattr(exc, "plan", None)
        if refused is not None:
            show_plan(console, refused)
        raise
