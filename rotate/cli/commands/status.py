"""``rotate status [CREDENTIAL]... [-o text|json|yaml]`` — is each chain closed, proven now.

Read-only (rotate.engine.status): every link from the backend's current version to each
consumer's pods is observed, none is changed, no lock is taken.  Exit 0 when every named
credential's chain is closed; 20 (:data:`~rotate.core.errors.EXIT_CHAIN_OPEN`) when one is
not, with the first broken link and the command that closes it on stderr (and in the
``status`` document, docs/cli.md).  Fingerprints only: no value is ever printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rotate.cli.columns import aligned
from rotate.cli.console import console_for
from rotate.cli.options import (
    DEFAULT_CHAIN,
    Chain,
    Kubeconfig,
    KubeContext,
    Output,
    OutputOpt,
    StateDir,
    repeat_args,
    state_dir_or_default,
)
from rotate.cli.state import state_of
from rotate.core.errors import EXIT_CHAIN_OPEN, EXIT_OK
from rotate.engine.options import Options

if TYPE_CHECKING:
    from rotate.engine.status import CredentialStatus


Credentials = Annotated[list[str] | None, typer.Argument(
    metavar="CREDENTIAL", show_default=False,
    help="Credentials to check [default: all in the chain file].")]
def status(
    ctx: typer.Context,
    credentials: Credentials = None,
    chain: Chain = DEFAULT_CHAIN,
    output: OutputOpt = Output.text,
    context: KubeContext = None,
    kubeconfig: Kubeconfig = None,
    state_dir: StateDir = None,
) -> None:
    """Prove every link of the chain now, read-only (exit 20: not closed)."""
    console = console_for(ctx, output)
    engine = state_of(ctx).engine()
    options = Options(chain_file=chain, state_dir=state_dir_or_default(state_dir),
                      context=context, kubeconfig=kubeconfig)
    found = engine.status(options, tuple(credentials or ()))
    warning = getattr(engine, "status_warning", None)
    if warning:
        console.warn(warning)
    extra = repeat_args(ctx)
    closed = all(s.closed for s in found)
    code = EXIT_OK if closed else EXIT_CHAIN_OPEN
    document = status_document(found, code, extra)
    if output is Output.text:
        console.lines(status_lines(found, extra))
    else:
        console.document(document)
    for s in found:
        broken = s.broken
        if broken is not None:
            console.error(f"the chain of {s.credential} is not closed: {broken.link} "
                          f"{broken.target}: {broken.detail}",
                          f"close it with `{with_options(s.command, extra)}`")
    raise typer.Exit(code)


def with_options(command: str, extra: str) -> str:
    """``command`` with the location options typed (``--chain`` …), as the resume commands."""
    return f"{command} {extra}" if command and extra else command


def status_document(found: Sequence[CredentialStatus], code: int, extra: str) -> dict[str, Any]:
    """The ``status`` document (docs/cli.md)."""
    creds = []
    for s in found:
        entry = s.to_json()
        entry["command"] = with_options(s.command, extra)
        creds.append(entry)
    return {"kind": "status", "closed": code == EXIT_OK, "exit_code": code,
            "credentials": creds}


def status_lines(found: Sequence[CredentialStatus], extra: str) -> list[str]:
    lines: list[str] = []
    for s in found:
        if lines:
            lines.append("")
        head = f"{s.credential}: {'closed' if s.closed else 'NOT CLOSED'}"
        if s.version is not None:
            head += f" — backend {s.backend} v{s.version}, fingerprint {s.fingerprint}"
        lines.append(head)
        lines += aligned([("ok" if link.ok else "FAIL", link.link, link.target, link.detail)
                          for link in s.links])
        broken = s.broken
        if broken is not None:
            lines.append(f"First broken link: {broken.link} {broken.target}")
            lines.append(f"To close it: {with_options(s.command, extra)}")
    return lines
