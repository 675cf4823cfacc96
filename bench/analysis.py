"""The benchmark's arithmetic: no I/O, no clock, no lab — what the unit tests pin down.

Invariants:

- Every time here is seconds on one clock (the harness's ``time.time()``), so samples from
  the load generator, watch events and step marks compare directly.
- A service's *inconsistency window* is first failed request → last failed request of one
  run; a service without failures has window 0.0 and no first/last.
- The critical path is the sum of the chain's unavoidable waits, each taken from the world
  in the order the run used (see :class:`CriticalPath`): the floor a tool taking that
  order must sit on.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    """One load request: which service, when it was sent, whether it succeeded."""

    service: str
    sent: float
    ok: bool
    latency: float


@dataclass(frozen=True)
class ServiceOutcome:
    service: str
    requests: int
    failed: int
    first_failure: float | None
    last_failure: float | None

    @property
    def window(self) -> float:
        if self.first_failure is None or self.last_failure is None:
            return 0.0
        return self.last_failure - self.first_failure


def outcomes(samples: Iterable[Sample], services: Sequence[str] = ()) -> dict[str, ServiceOutcome]:
    """Per service: requests, failures and the failure window; ``services`` always appear."""
    counts: dict[str, list[float]] = {s: [] for s in services}
    totals: dict[str, int] = dict.fromkeys(services, 0)
    for s in samples:
        totals[s.service] = totals.get(s.service, 0) + 1
        failures = counts.setdefault(s.service, [])
        if not s.ok:
            failures.append(s.sent)
    out: dict[str, ServiceOutcome] = {}
    for name in sorted(totals):
        fails = counts.get(name, [])
        out[name] = ServiceOutcome(name, totals[name], len(fails),
                                   min(fails) if fails else None, max(fails) if fails else None)
    return out


def busy_time(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals: parallel steps count once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def makespan(durations: Sequence[float], max_parallel: int) -> float:
    """Time to run ``durations`` in order on ``max_parallel`` slots (each job takes the
    first free slot) — how an executor with a bounded pool finishes a list of rollouts."""
    if max_parallel < 1:
        raise ValueError("max_parallel must be >= 1")
    if not durations:
        return 0.0
    slots = [0.0] * min(max_parallel, len(durations))
    heapq.heapify(slots)
    for d in durations:
        start = heapq.heappop(slots)
        heapq.heappush(slots, start + d)
    return max(slots)


#: the orders a run can take (CriticalPath.order), in the order the critical path lines list them
BESIDE_ESO, PREPARED, IN_ORDER = "prepared during ESO's reaction", "prepared", "in order"


@dataclass(frozen=True)
class CriticalPath:
    """The chain's floor for one run, in seconds; ``None`` parts were not observed.

    Two orders, told apart by what the world did (``prepared``):

    - *in order* (the runbook, the overlap strategy): ESO's reaction, then the provider's
      change, then the consumers' rollouts (new pod created → Ready) packed onto
      ``max_parallel`` slots, then one readyz;
    - *prepared* (the restart order, docs/chain.md "Order", its first new pod created
      after ESO had synced): ESO's reaction, then the
      consumers' new pods started (created → started) packed onto the slots, then the
      provider's change, then the catch-up (the switch → the last prepared pod Ready: about
      one readiness period), then one readyz;
    - *prepared during ESO's reaction* (``beside_eso``: a consumer's new pod was created
      before ESO had synced — rotate's restart order, the consumers prepared beside sync.wait):
      ESO's reaction and the consumers' pod starts do not follow each other, so the
      longer of the two, then the provider's change, the catch-up and one readyz.  Both
      begin right after the backend write (the pods need only the backend's value), so the
      longer of the two is the world's floor; the time before the first pod is created
      (mints, harvest, writes, the patch and the Deployment controller's reaction) is
      rotate's.  ``in_sequence`` is the same parts one after the other (the *prepared*
      sum), printed beside it: the looser floor of the two.

    ``provider_change`` is the provider's new pod created → Ready when it rolls, or the
    live change (``provider.apply`` + ``provider.verify`` from the journal) when it does not
    (``provider_how`` says which).
    """

    eso_reaction: float | None
    provider_change: float | None
    consumer_rollouts: tuple[float, ...]
    max_parallel: int
    readyz: float | None
    provider_how: str = "rollout"
    prepared: bool = False
    consumer_starts: tuple[float, ...] = ()
    catch_up: float | None = None
    beside_eso: bool = False

    @property
    def order(self) -> str:
        """Which of the orders above the run took (the critical path line names it)."""
        if not self.prepared:
            return IN_ORDER
        return BESIDE_ESO if self.beside_eso else PREPARED

    @property
    def consumers(self) -> float:
        """The consumers' share: their rollouts, or their starts plus the catch-up."""
        if self.prepared:
            return self.starts + (self.catch_up or 0.0)
        return makespan(self.consumer_rollouts, self.max_parallel)

    @property
    def starts(self) -> float:
        """The consumers' pod starts packed onto the slots (prepared orders)."""
        return makespan(self.consumer_starts, self.max_parallel)

    @property
    def in_sequence(self) -> float | None:
        """ESO's reaction, the consumers' share, the provider's change and one readyz, one
        after the other."""
        parts = (self.eso_reaction, self.provider_change, self.readyz)
        if any(p is None for p in parts) or (self.prepared and self.catch_up is None):
            return None
        return sum(p for p in parts if p is not None) + self.consumers

    @property
    def total(self) -> float | None:
        """The floor of the order the run took (class doc)."""
        whole = self.in_sequence
        if whole is None or self.order != BESIDE_ESO:
            return whole
        eso = self.eso_reaction or 0.0
        return whole - eso - self.starts + max(eso, self.starts)

    def as_dict(self) -> dict[str, object]:
        return {"eso_reaction": self.eso_reaction, "provider_change": self.provider_change,
                "provider_how": self.provider_how, "prepared": self.prepared,
                "consumer_rollouts": list(self.consumer_rollouts),
                "consumer_starts": list(self.consumer_starts), "catch_up": self.catch_up,
                "max_parallel": self.max_parallel, "consumers": self.consumers,
                "readyz": self.readyz, "beside_eso": self.beside_eso,
                "in_sequence": self.in_sequence, "total": self.total}


@dataclass(frozen=True)
class RunResult:
    """One measured run of one kind (``rotate`` or ``runbook``)."""

    kind: str
    index: int
    wall: float
    exit_code: int
    critical_path: CriticalPath
    services: Mapping[str, ServiceOutcome] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(o.failed for o in self.services.values())


@dataclass(frozen=True)
class Row:
    """One line of the table: the medians of every run of a kind."""

    kind: str
    runs: int
    wall: float
    vs_critical: float | None
    vs_runbook: float | None
    failed: Mapping[str, float]
    windows: Mapping[str, float]
    exit_codes: tuple[int, ...]
    failed_total: float = 0.0
    critical_path: float | None = None


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(results: Sequence[RunResult], services: Sequence[str]) -> list[Row]:
    """Median per kind. The ratio to the runbook pairs run *i* of a kind with run *i* of the
    runbook (measured back to back, under the same machine load), then takes the median."""
    runbook = {r.index: r.wall for r in results if r.kind == "runbook"}
    rows: list[Row] = []
    for kind in dict.fromkeys(r.kind for r in results):
        mine = [r for r in results if r.kind == kind]
        vs_cp = [r.wall / cp for r in mine
                 if (cp := r.critical_path.total) is not None and cp > 0]
        vs_rb = [r.wall / runbook[r.index] for r in mine
                 if r.index in runbook and runbook[r.index] > 0]
        rows.append(Row(
            kind=kind, runs=len(mine), wall=statistics.median(r.wall for r in mine),
            vs_critical=_median(vs_cp), vs_runbook=_median(vs_rb),
            failed={s: statistics.median(_outcome(r, s).failed for r in mine) for s in services},
            windows={s: statistics.median(_outcome(r, s).window for r in mine) for s in services},
            exit_codes=tuple(r.exit_code for r in mine),
            failed_total=statistics.median(r.failed for r in mine),
            critical_path=_median(r.critical_path.total for r in mine)))
    return rows


def _outcome(result: RunResult, service: str) -> ServiceOutcome:
    return result.services.get(service) or ServiceOutcome(service, 0, 0, None, None)


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def render_table(rows: Sequence[Row], services: Sequence[str]) -> str:
    """A Markdown table (also readable on a terminal): one line per run kind; failures and
    windows for the services that failed at all, the others summed up as 'others 0'."""
    shown = [s for s in services if any(r.failed.get(s) for r in rows)]
    quiet = [s for s in services if s not in shown]
    head = ["run", "n", "wall (median)", "÷ critical path", "÷ runbook",
            "failed requests (median)", "inconsistency window (median)", "exit codes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        failed = ", ".join(f"{s} {r.failed[s]:g}" for s in shown)
        windows = ", ".join(f"{s} {r.windows[s]:.1f} s" for s in shown)
        if quiet:
            failed = ", ".join(x for x in (failed, f"{len(quiet)} others 0") if x)
        total = r.failed_total
        lines.append("| " + " | ".join([
            r.kind, str(r.runs), f"{r.wall:.1f} s", _num(r.vs_critical, ".2f"),
            _num(r.vs_runbook, ".2f"), f"**{total:g}**: {failed}", windows or "0",
            " ".join(str(c) for c in r.exit_codes)]) + " |")
    return "\n".join(lines)


def render_critical_path(results: Sequence[RunResult]) -> str:
    """One line per order seen: the median critical path and its parts."""
    lines = []
    for order in (BESIDE_ESO, PREPARED, IN_ORDER):
        cps = [r.critical_path for r in results if r.critical_path.order == order]
        if cps:
            lines.append(_render_beside(cps) if order == BESIDE_ESO
                         else _render_order(cps, order))
    return "\n".join(lines)


def _med(values: Iterable[float | None]) -> str:
    return _num(_median(values), ".2f")


def _render_beside(cps: Sequence[CriticalPath]) -> str:
    how = "/".join(sorted({c.provider_how for c in cps}))
    return (f"critical path, {BESIDE_ESO} (median of {len(cps)} runs): "
            f"{_med(c.total for c in cps)} s = the longer of ESO reaction "
            f"{_med(c.eso_reaction for c in cps)} and consumer pod starts at max-parallel "
            f"{cps[0].max_parallel} {_med(c.starts for c in cps)} + provider change ({how}) "
            f"{_med(c.provider_change for c in cps)} + catch-up {_med(c.catch_up for c in cps)}"
            f" + readyz {_num(_median(c.readyz for c in cps), '.3f')}; the same parts one "
            f"after the other (the earlier definition): {_med(c.in_sequence for c in cps)} s")


def _render_order(cps: Sequence[CriticalPath], order: str) -> str:
    how = "/".join(sorted({c.provider_how for c in cps}))
    if order == PREPARED:
        middle = (f"consumer pod starts at max-parallel {cps[0].max_parallel} "
                  f"{_med(c.starts for c in cps)} + provider change ({how}) "
                  f"{_med(c.provider_change for c in cps)} + catch-up "
                  f"{_med(c.catch_up for c in cps)}")
    else:
        middle = (f"provider change ({how}) {_med(c.provider_change for c in cps)} + slowest "
                  f"consumer rollouts at max-parallel {cps[0].max_parallel} "
                  f"{_med(c.consumers for c in cps)}")
    return (f"critical path, {order} (median of {len(cps)} runs): {_med(c.total for c in cps)} s"
            f" = ESO reaction {_med(c.eso_reaction for c in cps)} + {middle} + readyz "
            f"{_num(_median(c.readyz for c in cps), '.3f')}")
