"""``rotate lab up | down | status | fault`` — the local lab (lab.md).

The Typer app that the entry point ``rotate.plugins:lab`` names; the product's gate
(``rotate/cli/commands/plugins.py``) loads it only when ``rotate lab`` is parsed.  The commands
reach :mod:`rotate_lab.control` through :func:`lab_control`, so tests can hand them a fake
through ``CliState.extra["lab"]`` without patching a module.

Output: progress of ``up`` and the list of stopped processes of ``down`` are notes on
stderr; the result (the lab's parts, or the faults now active) is the only output, on
stdout — or one JSON document with ``-o json``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Protocol, cast

import typer

from rotate.cli.plugin_api import Console, Output, OutputOpt, aligned, console_for, state_of

DEFAULT_DIR = Path(".rotate-lab")
#: key of ``CliState.extra`` holding a factory of the lab control (tests' fake)
LAB_CONTROL_KEY = "lab"


class LabControl(Protocol):
    """``rotate_lab.control`` as ``rotate lab`` uses it (lab.md)."""

    def up(
        self, dir: Path, profile: str, reloader: bool, *, on_progress: Callable[[str], None],
        services: int | None = None, nice: int = 0, extras: tuple[str, ...] = (),
    ) -> Any: ...

    def down(self, dir: Path) -> list[str]: ...

    def status(self, dir: Path) -> dict[str, Any]: ...

    def fault(self, dir: Path, kind: str | None, target: str | None, clear: bool) -> Any: ...


def lab_control(ctx: typer.Context) -> LabControl:
    """The control this invocation drives: the one a test put in ``CliState.extra``, else
    :mod:`rotate_lab.control` (imported here, on use)."""
    factory = state_of(ctx).extra.get(LAB_CONTROL_KEY)
    if factory is not None:
        return cast(LabControl, factory())
    from rotate_lab import control

    return cast(LabControl, control)

lab_app = typer.Typer(
    name="lab", help="The local lab: Kubernetes API, OpenBao, Config Center, the shop.",
    no_args_is_help=True, rich_markup_mode=None, add_completion=False,
    pretty_exceptions_enable=False)

LabDir = Annotated[Path, typer.Option("--dir", metavar="DIR", help="Lab directory.")]


class Profile(StrEnum):
    fast = "fast"
    realistic = "realistic"


class Extra(StrEnum):
    """Optional parts, started only when asked (``--with``)."""

    bugsink = "bugsink"
    mariadb = "mariadb"
    prometheus = "prometheus"
    pushgateway = "pushgateway"


def _status_rows(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for name, part in (status.get("parts") or {}).items():
        part = part or {}
        where = part.get("addr") or part.get("server") or part.get("url") or "-"
        healthy = part.get("healthy")
        health = "-" if healthy is None else ("healthy" if healthy else "DOWN")
        rows.append((name, str(where), health))
    return rows


def show_status(console: Console, status: dict[str, Any]) -> None:
    if console.json_mode:
        console.json({"kind": "lab-status", **status})
        return
    running = status.get("running")
    lines = [f"lab in {status.get('dir')}"
             + ("" if running is None else (": running" if running else ": not running"))
             + (f", at nice {status['nice']}" if status.get("nice") else "")]
    lines += aligned(_status_rows(status))
    faults = status.get("faults") or {}
    if faults:
        lines.append("faults: " + ", ".join(
            k if v is True else f"{k} {','.join(map(str, v))}" for k, v in faults.items()))
    if status.get("env_file"):
        lines.append(f"env: . {status['env_file']}")
    console.lines(lines)


@lab_app.command("up")
def up(
    ctx: typer.Context,
    dir: LabDir = DEFAULT_DIR,
    profile: Annotated[Profile, typer.Option("--profile", help="fast (tests) or realistic "
                                             "(delays like a real cluster).")] = Profile.fast,
    reloader: Annotated[bool, typer.Option("--reloader",
                                           help="Also run the Reloader controller.")] = False,
    services: Annotated[int | None, typer.Option(
        "--services", metavar="N", show_default=False,
        help="Consumers of dragonfly: cart, order, user and N-3 generated ones "
             "(3-100).")] = None,
    nice: Annotated[int, typer.Option(
        "--nice", metavar="N", help="Run every lab process and pod at niceness N (0-19), so "
        "that commands run beside the lab get the CPU first, as beside a real "
        "cluster.")] = 0,
    extras: Annotated[list[Extra] | None, typer.Option(
        "--with", metavar="PART", show_default=False,
        help="Also start an optional part: bugsink (an init-only app, rotated with apply: "
             "job; needs `make bugsink`), mariadb (the credential mariadb, rotated by the "
             "plug-in examples/provider-mariadb, and its reader catalog), prometheus (Debian's "
             "Prometheus on loopback, scraping the shop's /metrics; PROMETHEUS_URL in the "
             "env file), pushgateway (Debian's Prometheus Pushgateway on loopback, for "
             "notify.pushgateway; PUSHGATEWAY_URL in the env file); repeatable.")] = None,
    output: OutputOpt = Output.text,
) -> None:
    """Start everything in the background; return when every workload is Ready."""
    console = console_for(ctx, output)
    more = {"extras": tuple(e.value for e in extras)} if extras else {}
    result = lab_control(ctx).up(dir, profile.value, reloader, on_progress=console.note,
                                 services=services, nice=nice, **more)
    status = result if isinstance(result, dict) else {"dir": str(dir)}
    show_status(console, status)
    if not console.json_mode:
        console.lines([f"next: . {Path(status.get('env_file') or dir / 'env')} "
                       "&& rotate dragonfly"])


@lab_app.command("down")
def down(ctx: typer.Context, dir: LabDir = DEFAULT_DIR) -> None:
    """Stop every process the lab started, and only those."""
    console = console_for(ctx, Output.text)
    console.lines(lab_control(ctx).down(dir))


@lab_app.command("status")
def status(ctx: typer.Context, dir: LabDir = DEFAULT_DIR,
           output: OutputOpt = Output.text) -> None:
    """Every part with its address and health."""
    console = console_for(ctx, output)
    show_status(console, lab_control(ctx).status(dir))


@lab_app.command("fault")
def fault(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Argument(
        metavar="KIND", show_default=False,
        help="eso-stall, eso-error, bao-down, config-center-5xx, crashloop, readyz-fail, "
             "provider-crashloop, rotator-fail, rotator-hang, portforward-drop, "
             "journal-unreachable, list-forbidden.")] = None,
    target: Annotated[str | None, typer.Argument(
        metavar="TARGET", show_default=False,
        help="The service, for crashloop and readyz-fail; NS/NAME of one ExternalSecret "
             "for eso-stall (all of them without); the phase (optional) for rotator-fail "
             "and rotator-hang; the namespace (`*`: cluster-wide) for list-forbidden.")
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Switch KIND (or every fault) "
                                        "off.")] = False,
    dir: LabDir = DEFAULT_DIR,
    output: OutputOpt = Output.text,
) -> None:
    """Switch a lab fault on (or off with --clear)."""
    console = console_for(ctx, output)
    active = lab_control(ctx).fault(dir, kind, target, clear)
    if console.json_mode:
        console.json({"kind": "lab-faults", "faults": active})
        return
    faults = active if isinstance(active, dict) else {}
    console.lines(["faults: " + (", ".join(
        k if v is True else f"{k} {','.join(map(str, v))}" for k, v in faults.items())
        or "none")])
