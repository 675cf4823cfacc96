"""What one CLI invocation is wired to: the engine facade, the clock (and ``extra``: what a
plugin such as the lab reads, e.g. a test's fake lab control).

Why a seam: the golden tests drive the real CLI (parsing, rendering, exit codes, signal
handling) against a fake engine. Nothing is patched: the commands never import the engine
by name at call sites; they ask :func:`state_of` for the :class:`CliState` that ``main()``
(or a test, through ``obj=``) put on the root context.  The default state builds the real
:class:`rotate.engine.api.Engine` — with the real adapters and chain loader of
``rotate.engine.wiring`` — lazily, inside the factory, so that ``rotate --help`` pays
nothing for the engine and its adapters.

Invariant: every engine call goes through ``CliState.engine()``.  The product never reaches
the lab (a separate distribution, plugged in by ``rotate/cli/commands/plugins.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading

    from rotate.chain.model import Chain
    from rotate.core.errors import JournalUnreadable
    from rotate.core.secret import Secret
    from rotate.core.waiting import CancelToken
    from rotate.engine.due import Due
    from rotate.engine.model import (
        Check,
        CredentialSummary,
        Observer,
        Options,
        Plan,
        RunReport,
        RunSummary,
    )
    from rotate.engine.status import CredentialStatus
    from rotate.engine.watch_service import WatchSettings


class Engine(Protocol):
    """The engine (``rotate.engine.api.Engine``), as the CLI uses it: typed end to end, so
    mypy checks that the real engine fits (``_real_engine``) and what the commands hand it.
    The commands build its :class:`~rotate.engine.options.Options` themselves
    (docs/design.md "Engine ↔ CLI contract")."""

    def load_chain(self, options: Options) -> Chain: ...

    def plan(self, options: Options, credential: str) -> Plan: ...

    def run(
        self, options: Options, credential: str, observer: Observer, cancel: CancelToken,
        new_value: Secret | None = None,
    ) -> RunReport: ...

    def plan_several(self, options: Options, credentials: Sequence[str]) -> Plan: ...

    def run_several(self, options: Options, credentials: Sequence[str], observer: Observer,
                    cancel: CancelToken) -> RunReport: ...

    def resume(
        self, options: Options, run_id: str, observer: Observer, cancel: CancelToken,
        new_value: Secret | None = None,
    ) -> RunReport: ...

    def rollback(
        self, options: Options, run_id: str, observer: Observer, cancel: CancelToken,
    ) -> RunReport: ...

    def runs(
        self, options: Options, unreadable: list[JournalUnreadable] | None = None,
    ) -> Sequence[RunSummary]: ...

    def show(self, options: Options, run_id: str) -> RunReport: ...

    def list_credentials(self, options: Options) -> Sequence[CredentialSummary]: ...

    def doctor(self, options: Options) -> Sequence[Check]: ...

    def status(self, options: Options, credentials: Sequence[str] = ()
               ) -> Sequence[CredentialStatus]: ...

    def watch(self, options: Options, credentials: Sequence[str], settings: WatchSettings,
              stop: threading.Event, child_args: Sequence[str],
              log: Callable[[str], None]) -> None: ...

    def due(self, options: Options, credentials: Sequence[str] = ()) -> Sequence[Due]: ...


def _real_engine() -> Engine:
    from rotate.engine.api import Engine as RealEngine
    from rotate.engine.wiring import RealAdapters, load_chain

    return RealEngine(RealAdapters(), load_chain)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class CliState:
    engine: Callable[[], Engine] = _real_engine
    clock: Callable[[], datetime] = _utc_now
    extra: dict[str, Any] = field(default_factory=dict)


def state_of(ctx: Any) -> CliState:
    """The CliState on the root context, or the real wiring when none was given."""
    root = ctx.find_root() if ctx is not None else None
    obj = getattr(root, "obj", None)
    return obj if isinstance(obj, CliState) else CliState()
