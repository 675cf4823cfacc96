"""A canary's bake: its signals watched for the bake time (chain-file.md "canary").

Three signals, read once per check (every :data:`PERIOD` seconds) for the whole bake:

* **pods** — each canary workload's rollout status (kubectl's rules: every replica updated
  and available; a pod that turns unready makes it false);
* **readyz** — each canary service's readyz (one GET; not 200, or unreachable, is bad);
* **query** — a PromQL instant query's value, compared with its ``max`` (above is bad; no
  data is not a breach; Prometheus unreachable is bad: the bound cannot be checked).

A signal fails the bake when it is bad at :data:`STRIKES` checks in a row, so one dropped
packet does not stop a run, while a canary that stays bad for two checks does.  The verdict
names the signal, its observation and the bound — never a value of the credential.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rotate.clients.seams import Kube, Metrics, Readyz, ReadyzTarget
from rotate.core.errors import ClientError, PermanentError
from rotate.core.observation import Observation, report
from rotate.core.refs import ObjectRef
from rotate.core.waiting import CancelToken
from rotate.stages.rollout import rollout_status

#: seconds between two checks of every signal
PERIOD = 1.0
#: consecutive bad checks of one signal that fail the bake
STRIKES = 2


@dataclass(frozen=True)
class Signal:
    """One thing the bake watches: ``name`` as the failure message spells it, ``read``
    returning None when it is good, else what was seen."""

    name: str
    read: Callable[[], str | None]


def pods_signal(kube: Kube, ref: ObjectRef) -> Signal:
    def read() -> str | None:
        try:
            done, detail = rollout_status(kube.get(ref.kind, ref.namespace, ref.name))
        except ClientError as exc:
            return f"cannot be read ({exc.reason})"
        return None if done else detail

    return Signal(f"pods of {ref}", read)


def readyz_signal(readyz: Readyz, target: ReadyzTarget) -> Signal:
    def read() -> str | None:
        try:
            status = readyz.status(target)
        except ClientError as exc:
            return f"no answer ({exc.reason})"
        return None if status == 200 else f"answered HTTP {status}"

    return Signal(f"readyz {target}", read)


def query_signal(metrics: Metrics, url: str, expr: str, bound: float) -> Signal:
    def read() -> str | None:
        try:
            value = metrics.value(url, expr)
        except PermanentError as exc:
            return f"cannot be evaluated ({exc.reason})"
        except ClientError as exc:
            return f"cannot be read: Prometheus {exc.reason}"
        if value is None or value <= bound:
            return None
        return f"= {value:g}, above max {bound:g}"

    return Signal(f"query `{expr}`", read)


@dataclass(frozen=True)
class Verdict:
    """``failed``: the signal and what it showed (None: every signal held for the bake);
    ``seconds``: how long the bake ran; ``checks``: how many rounds were read."""

    failed: str | None
    seconds: float
    checks: int


def bake(signals: Sequence[Signal], seconds: float, cancel: CancelToken,
         clock: Callable[[], float] = time.monotonic) -> Verdict:
    """Watch ``signals`` for ``seconds``: the first to be bad :data:`STRIKES` checks in a row
    ends the bake (a failed verdict); cancel raises Interrupted.  At least one round is read
    (a zero bake still checks the canary once)."""
    start = clock()
    strikes = {s.name: 0 for s in signals}
    checks = 0
    while True:
        cancel.check()
        checks += 1
        for signal in signals:
            seen = signal.read()
            strikes[signal.name] = strikes[signal.name] + 1 if seen is not None else 0
            if seen is not None and strikes[signal.name] >= STRIKES:
                return Verdict(f"{signal.name} {seen}", clock() - start, checks)
        elapsed = clock() - start
        if elapsed >= seconds and not any(strikes.values()):
            return Verdict(None, elapsed, checks)
        report(Observation(f"baking {elapsed:.0f}s of {seconds:g}s, {len(signals)} signal(s) good"
                if not any(strikes.values()) else "a signal is bad: checking it again"))
        cancel.sleep(PERIOD)
