"""``rotate watch``: what the leader does about each credential, and the loop that does it.

The decision (:func:`decide`) is pure, from three observations of one credential:

* its run lock — Lease ``rotate-<credential>`` (rotate.engine.lock): *held* while renewed by
  a live holder; *free* when absent, expired, or held by a process of this host that is
  gone;
* its latest unfinished run in the journals, the cluster's included
  (rotate.engine.unfinished);
* the backend's current version M and ``rotate-version`` W, the last one a rotate run wrote
  (rotate.engine.adoption).

and says, in this order:

1. an unfinished run while its lock is held: **wait** — a run is in flight, and it carries
   the chain (a Secret changing under it is its own business);
2. an unfinished *adopt* run, ``running`` or ``interrupted``, whose lock is free: **resume**
   it, taking its lock over (its holder — a leader killed mid-run — is gone);
3. any other unfinished run (a rotation an operator started, a run that *failed*): **nothing**,
   named with the commands that close it — a failure is for a person to read;
4. the lock held without an unfinished run (a run starting, or one that changed nothing):
   **wait**;
5. M == W: **nothing** — the chain holds the backend's current version;
6. M > W: **adopt** — ``rotate CREDENTIAL --adopt --confirm``, which itself finds a value
   equal to W's a no-op.

Every ``resync`` the leader also asks which credentials are due (rotate.engine.due) and
rotates those as one run (``rotate due NAMES --confirm``), unless one has a run in flight.

:class:`Watcher` runs it for every credential whose target Secret changed (events from
rotate.clients.secret_watch), for every credential when this replica becomes leader (a
change made while no watcher ran, a run its predecessor left) and every ``resync`` seconds,
and again ``retry`` seconds after a *wait*.  Only the leader acts (rotate.engine.leadership,
renewed by a thread of its own so that a long run never costs the Lease).  Runs are child
processes of the watcher: a leader killed mid-run takes its run with it, and the run is
then an unfinished adopt run whose holder is gone — rule 2 for the next leader.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from rotate.chain.model import Chain
from rotate.engine.journal import RunState
from rotate.engine.unfinished import describe

ActionKind = Literal["adopt", "resume", "wait", "nothing"]
#: unfinished statuses the watcher resumes (a process killed, or stopped by a signal)
RESUMABLE = ("running", "interrupted")


@dataclass(frozen=True)
class LockState:
    """A credential's run lock as observed: ``exists`` and ``free`` (see the module doc)."""

    exists: bool
    free: bool
    holder: str = ""


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    credential: str
    why: str
    run_id: str = ""
    #: the lock exists but its holder is gone: the child takes it over (``--take-over-lock``)
    take_over: bool = False


def targets_of(chain: Chain, names: Iterable[str] = ()) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each target Secret (namespace, name) and the credentials it carries, of ``names``
    (every credential of the chain when empty)."""
    found: dict[tuple[str, str], list[str]] = {}
    wanted = [chain.credential(n) for n in dict.fromkeys(names)] or \
        list(chain.credentials.values())
    for cred in wanted:
        name = cred.name
        found.setdefault((cred.secret.namespace, cred.secret.name), []).append(name)
    return {k: tuple(v) for k, v in found.items()}


def decide(credential: str, lock: LockState, open_run: RunState | None,
           versions: tuple[int, int] | None, unreadable: str = "") -> Action:
    """What the leader does about ``credential`` now (the rules of the module doc).
    ``versions``: (M, W), None when they could not be read (``unreadable`` says why)."""
    if open_run is not None:
        what = describe(open_run)
        if not lock.free:
            return Action("wait", credential, f"run {what} holds the lock ({lock.holder})")
        if open_run.status in RESUMABLE and open_run.start.adopted is not None:
            return Action("resume", credential, f"run {what} stopped with its holder gone: "
                          "resuming it", run_id=open_run.run_id, take_over=lock.exists)
        return Action("nothing", credential, f"run {what} is unfinished and left to an "
                      f"operator: `rotate resume {open_run.run_id} --confirm` or `rotate "
                      f"rollback {open_run.run_id} --confirm`", run_id=open_run.run_id)
    if not lock.free:
        return Action("wait", credential, f"a run holds the lock ({lock.holder})")
    if versions is None:
        return Action("nothing", credential, unreadable or "the backend could not be read")
    current, written = versions
    if current == written:
        return Action("nothing", credential, f"the chain holds v{current}, the backend's "
                      "current version")
    return Action("adopt", credential, f"the backend's v{current} was not written by rotate "
                  f"(its last write is v{written}): adopting it", take_over=lock.exists)


class Observer(Protocol):
    """The three observations of one credential (rotate.engine.watch_service)."""

    def lock(self, credential: str) -> LockState: ...

    def open_run(self, credential: str) -> RunState | None: ...

    def versions(self, credential: str) -> tuple[tuple[int, int] | None, str]: ...


class Runner(Protocol):
    """Runs one rotate command to its end; its exit code (rotate.clients.rotate_process)."""

    def run(self, args: list[str]) -> int: ...


class Metrics(Protocol):
    """What the watcher counts (rotate.clients.watch_http); never a value."""

    def changed(self) -> None: ...

    def acted(self, action: str, credential: str, code: int) -> None: ...

    def leading(self, leading: bool) -> None: ...


class Leader(Protocol):
    @property
    def leading(self) -> bool: ...

    @property
    def duration(self) -> int: ...

    def step(self) -> bool: ...

    def release(self) -> None: ...


def command_for(action: Action) -> list[str]:
    """The rotate command that carries out ``action`` (empty: none)."""
    take = ["--take-over-lock"] if action.take_over else []
    if action.kind == "adopt":
        return [action.credential, "--adopt", "--confirm", *take]
    if action.kind == "resume":
        return ["resume", action.run_id, "--confirm", *take]
    return []


class Watcher:
    """The loop: events in through :meth:`changed`, actions out through the runner."""

    def __init__(self, targets: Mapping[tuple[str, str], tuple[str, ...]], observer: Observer,
                 runner: Runner, leader: Leader, metrics: Metrics, log: Callable[[str], None],
                 *, resync: float = 300.0, retry: float = 5.0,
                 due: Callable[[], Iterable[str]] | None = None) -> None:
        self._targets = dict(targets)
        self._all = tuple(dict.fromkeys(c for cs in self._targets.values() for c in cs))
        self.credentials = self._all
        self._observer, self._runner, self._leader = observer, runner, leader
        self._metrics, self._log, self._due = metrics, log, due
        self._resync, self._retry = resync, retry
        self._pending: dict[str, float] = {}  # credential → not before (monotonic)
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self.beat = time.monotonic()  # the loop's last pass (healthz)
        self.acting = False  # a child run is under way (healthz: the loop is not wedged)

    def changed(self, namespace: str, name: str) -> None:
        """A target Secret changed (or was listed): its credentials are looked at now."""
        self._metrics.changed()
        self._queue(self._targets.get((namespace, name), ()), 0.0)

    def _queue(self, credentials: Iterable[str], delay: float) -> None:
        at = time.monotonic() + delay
        with self._mutex:
            for cred in credentials:
                self._pending[cred] = min(self._pending.get(cred, at), at)
        self._wake.set()

    def _next(self) -> tuple[str | None, float]:
        """A credential due now, or None and how long until the next one."""
        now = time.monotonic()
        with self._mutex:
            ready = [c for c, at in self._pending.items() if at <= now]
            if ready:
                del self._pending[ready[0]]
                return ready[0], 0.0
            return None, min((at - now for at in self._pending.values()), default=60.0)

    def _elect(self, stop: threading.Event) -> None:
        leading = False
        while not stop.is_set():
            now = self._leader.step()
            if now != leading:
                self._metrics.leading(now)
                self._log("leading: this replica acts now" if now
                          else "not leading: another replica acts")
                if now:
                    self._queue(self._all, 0.0)  # what changed or stopped while no one led
            leading = now
            stop.wait(self._leader.duration / 3)
        self._leader.release()

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: elect (a thread), act on what is pending while leading."""
        elector = threading.Thread(target=self._elect, args=(stop,), name="leader-election",
                                   daemon=True)
        elector.start()
        next_resync = time.monotonic() + self._resync
        while not stop.is_set():
            self.beat = time.monotonic()
            if self.beat >= next_resync:
                next_resync = self.beat + self._resync
                self._queue(self._all, 0.0)
                self._run_due()
            credential, wait = self._next()
            if credential is None or not self._leader.leading:
                if credential is not None:
                    self._queue((credential,), self._retry)
                self._wake.clear()
                self._wake.wait(min(wait, self._retry, next_resync - self.beat))
                continue
            self._act(credential)
        elector.join(timeout=10)

    def _run_due(self) -> None:
        """Credentials due for a rotation (``maxAge``, ``schedule``: rotate.engine.due) are
        rotated as one run, ``rotate due NAMES --confirm`` — unless one of them has a run
        in flight or unfinished, which the next resync finds settled."""
        if self._due is None or not self._leader.leading:
            return
        names = list(self._due())
        if not names:
            return
        obs = self._observer
        busy = [n for n in names if not obs.lock(n).free or obs.open_run(n) is not None]
        if busy:
            self._log(f"due: {', '.join(names)}; waiting for the run of {', '.join(busy)}")
            return
        self._log(f"due: {', '.join(names)}: rotate due {' '.join(names)} --confirm")
        self.acting = True
        try:
            code = self._runner.run(["due", *names, "--confirm"])
        finally:
            self.acting = False
        self._metrics.acted("due", "+".join(names), code)
        self._log(f"due: ended with exit {code}")

    def _act(self, credential: str) -> None:
        obs = self._observer
        versions, why = obs.versions(credential)
        action = decide(credential, obs.lock(credential), obs.open_run(credential),
                        versions, why)
        if action.kind == "wait":
            self._log(f"{credential}: waiting — {action.why}")
            self._queue((credential,), self._retry)
            return
        if action.kind == "nothing":
            if action.run_id:
                self._log(f"{credential}: {action.why}")
            return
        self._log(f"{credential}: {action.why}: rotate {' '.join(command_for(action))}")
        self.acting = True
        try:
            code = self._runner.run(command_for(action))
        finally:
            self.acting = False
        self._metrics.acted(action.kind, credential, code)
        self._log(f"{credential}: {action.kind} ended with exit {code}")
