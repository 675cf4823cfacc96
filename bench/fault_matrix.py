"""The fault matrix as data: which cases to run, derived from the plans `rotate` prints, and
the table they are reported in.  No I/O here (bench/faults.py runs the cases).

Invariants:

- The kinds a case signals at come from the plan (``rotate CRED -o json``), never from a
  list kept here: a kind added to or moved in the engine is in the next matrix by itself.
- A kind is *state-changing* unless its name says it only reads (``READ_ONLY``): a new kind
  is therefore signalled a few ms into its work too, the safe default.
- Every disturbance is recovered twice, once by ``resume`` and once by ``rollback``
  (two cases), except the shared-provider, shared-consumer and human-restart cases, which an
  operator recovers by resuming.
- A torn journal (a kill mid-write) is a kill at a state-changing kind with a partial
  record appended to the killed run's journal; a lock take-over freezes the run at a kind
  that only reads (``TAKE_OVER_AT``: the step in flight changes nothing once thawed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: kinds that only read or wait: signalled at their start only
READ_ONLY = frozenset({"sync.wait", "provider.wait", "provider.verify", "config.harvest",
                       "consumer.wait", "readyz.check"})
#: how far into a state-changing step the second signal lands
INTO_MS = 5
SIGNALS = ("kill", "term")
RECOVERIES = ("resume", "rollback")
#: lab fault, its target, and the kind at whose start it is switched on "during" a run
FAULTS: tuple[tuple[str, str | None, str], ...] = (
    ("eso-stall", None, "sync.trigger"),
    ("eso-error", None, "sync.trigger"),
    ("bao-down", None, "backend.write"),
    ("config-center-5xx", None, "config.write"),
    ("crashloop", "cart", "consumer.restart"),
    ("readyz-fail", "cart", "consumer.wait"),
    ("provider-crashloop", None, "provider.apply"),
    # the API server's port-forward to Dragonfly drops mid-step and refuses new streams
    # (rotate runs from the host, outside the lab's cluster: it reaches Dragonfly that way)
    ("portforward-drop", None, "provider.apply"),
    # a workload that reads the Secret itself and never becomes ready
    ("crashloop", "report-env", "workload.restart"),
    # one ExternalSecret of the two the path has never syncs
    ("eso-stall", "reports/dragonfly-password", "sync.trigger"),
    # a consumer in a namespace rotate may not read (its workloads cannot be listed):
    # before the run only — discovery is preflight's
    ("list-forbidden", "reports", ""),
)
#: faults a run must refuse in preflight (exit 3, nothing changed)
PREFLIGHT_FAULTS = ("list-forbidden",)
#: kinds at which a frozen run's Lease is taken over by `resume --take-over-lock` (read-only:
#: the step the frozen run was in changes nothing when it is thawed; not the consumers' kinds,
#: whose lanes may be in state-changing steps at that moment)
TAKE_OVER_AT = ("provider.verify", "readyz.check")
#: where a run is killed while the API server drops its journal's requests (journal-down),
#: and where a second machine starts the credential after a run was killed (machines)
JOURNAL_AT = "sync.wait"
#: what a torn case appends to the killed run's journal: a record cut off mid-write
TORN_RECORD = b'{"data": {"detail": "cut off mid-wri'
#: human `kubectl rollout restart` → (whose run: main/other, workload, at the start of kind)
HUMAN: tuple[tuple[str, str, str], ...] = (
    ("main", "dragonfly/dragonfly", "sync.wait"),
    ("main", "dragonfly/dragonfly", "provider.apply"),
    ("main", "dragonfly/dragonfly", "consumer.wait"),
    ("main", "shop/cart", "consumer.restart"),
    ("main", "shop/cart", "consumer.wait"),
    ("other", "dragonfly/dragonfly", "sync.wait"),
    ("other", "dragonfly/dragonfly", "provider.wait"),
)

#: a credential sharing consumers (not a provider) with the main one, and the offsets (ms) at
#: which it is started after the main one
SHARING_OFFSETS_MS = (0, 150, 500)
#: kinds at which an ``--adopt`` run (after a human's ``bao kv put``) is killed
ADOPT_AT = ("sync.trigger", "provider.apply")
#: kinds at which the watcher's leader is killed with the adopt run it started
WATCH_AT = ("provider.apply",)
#: kinds at whose start the target Secret is changed by hand (after / while the sync proves it)
SECRET_EDIT_AT = ("sync.wait", "provider.apply")
#: a run of the main and the sharing credential together (`rotate A B --confirm`) is killed
#: at the start of each of these kinds: consumers prepared (before the restart credential's
#: switch, after the overlap one's provider took both values), and their readiness proven;
#: and at sync.wait, while each credential's chain runs on its own lane beside the other's
SEVERAL_AT = ("sync.wait", "consumer.restart", "readyz.check")
#: a human edit of an owned pointer of this consumer's document, at the start of this kind
#: (after preflight read the versions, well before the parallel document writes)
HUMAN_EDIT = ("order", "backend.write")


@dataclass(frozen=True)
class Spec:
    """One case: run ``credential``, disturb it, recover it.

    ``disturbance`` is ``signal`` (``sig`` at ``kind`` + ``delay_ms``), ``fault-before``,
    ``fault-during`` (``fault`` on ``target`` switched on at ``kind``), ``human``
    (``kubectl rollout restart`` of ``target`` at ``kind``), ``shared`` (both
    credentials at once; ``kind``: the step of ``credential`` at which the other starts,
    "" for the same instant), ``torn`` (kill -9 at ``kind``, then a torn record appended to
    its journal), ``takeover`` (frozen at ``kind`` until its Leases are stale, taken over
    by ``rotate resume RUN --confirm --take-over-lock``, then thawed),
    ``bao-write`` (a ``bao kv put`` of the path at ``kind``, after
    sync.wait proved the Secret: the run exits 17), ``oversized`` (``--value-stdin`` with a
    value the provider cannot take: exit 2, nothing changed), ``sharing`` (``target``, a
    credential sharing consumers, started
    ``delay_ms`` after ``credential``) or ``human-edit`` (an owned pointer of ``target``'s
    Config Center document changed by hand at ``kind``), ``adopt-noop`` (``--adopt
    --confirm`` with nothing to adopt: exit 0, nothing changed), ``adopt`` (a ``bao kv
    put`` by hand, then ``--adopt --confirm`` with ``sig`` at ``kind``), ``secret-edit``
    (the target Secret changed by hand at ``kind``; bench/fault_adopt.py), ``several``
    (``credential`` and ``target`` as one run, ``sig`` at ``kind``) or ``provider-freeze``
    (the provider's process SIGSTOPped at ``kind`` until the run ended; bench/fault_plugin.py)
    or ``canary`` (``fault`` on the canary ``target`` at ``kind``, the run in waves behind
    it: exit 19; bench/fault_canary.py)
    or ``watch-leader`` (two ``rotate watch`` replicas; after a ``bao kv put`` the leader's
    adopt run reaches ``kind`` and the leader is killed with it; bench/fault_watch.py)."""

    disturbance: str
    credential: str
    recovery: str
    kind: str = ""
    sig: str = ""
    delay_ms: int = 0
    fault: str = ""
    target: str = ""
    tagged: bool = False  # the name starts with [credential] (not the matrix's main one)

    @property
    def name(self) -> str:
        cred = f"[{self.credential}] " if self.tagged else ""
        at = f"{self.kind}{f'+{self.delay_ms}ms' if self.delay_ms else ''}"
        what = {
            "signal": f"{self.sig} at {at}",
            "fault-before": f"fault {self.fault}{' ' + self.target if self.target else ''}"
                            " before",
            "fault-during": f"fault {self.fault}{' ' + self.target if self.target else ''}"
                            f" at {at}",
            "human": (f"human deletes the rotator Job at {at}" if self.target == "delete job"
                      else f"human restart {self.target} at {at}"),
            "shared": f"both credentials at once{' (at ' + at + ')' if self.kind else ''}",
            "torn": f"kill at {at} + torn journal record",
            "takeover": f"lock taken over at {at}",
            "bao-write": f"backend write after sync.wait (at {at})",
            "oversized": "oversized value (--value-stdin, 64 KiB)",
            "sharing": f"{self.credential} and {self.target} sharing consumers, "
                       + (f"{self.target} {self.delay_ms} ms later" if self.delay_ms
                          else "at once"),
            "human-edit": f"human edit of {self.target}'s document at {at}",
            "adopt-noop": "--adopt with nothing to adopt",
            "adopt": f"{self.sig} at {at} of --adopt after a bao kv put",
            "canary": f"canary {self.target} fails its bake ({self.fault} at {at})",
            "secret-edit": f"Secret edited by hand at {at}",
            "several": f"{self.credential} and {self.target} in one run, {self.sig} at {at}",
            "provider-freeze": f"provider frozen (SIGSTOP) at {at}",
            "watch-leader": f"watcher leader killed at {at} of its adopt run",
            "journal-down": f"API server unreachable while the journal is written (kill at "
                            f"{at})",
            "machines": (f"second machine starts it after a kill at {at}" if self.kind
                         else "two machines start it at once"),
        }[self.disturbance]
        return f"{cred}{what} → {self.recovery}"


@dataclass
class Outcome:
    """What a case saw: exit codes (disturbed run first, -N: killed by signal N), the last
    journal event when it was disturbed, and every inconsistency seen from outside."""

    name: str
    exit_codes: list[int] = field(default_factory=list)
    reached: str = ""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def consistent(self) -> bool:
        return not self.problems


def plan_kinds(plan: dict[str, Any]) -> list[str]:
    """The distinct step kinds of a ``plan`` document, in the order the run reaches them."""
    out: list[str] = []
    for step in plan.get("steps", []):
        kind = str(step["kind"])
        if kind not in out:
            out.append(kind)
    return out


def _alternate(i: int) -> tuple[str, str]:
    return (RECOVERIES[i % 2], RECOVERIES[(i + 1) % 2])


def signal_specs(credential: str, kinds: Sequence[str], signals: Sequence[str]) -> list[Spec]:
    """Each signal at the start of each kind, and INTO_MS into each state-changing kind,
    each recovered by resume and by rollback."""
    out: list[Spec] = []
    for kind in kinds:
        delays = (0,) if kind in READ_ONLY else (0, INTO_MS)
        for delay in delays:
            for sig in signals:
                out += [Spec("signal", credential, how, kind=kind, sig=sig, delay_ms=delay)
                        for how in RECOVERIES]
    return out


def fault_specs(credential: str, kinds: Sequence[str]) -> list[Spec]:
    """Every lab fault before the run and at the start of the kind it hits, each recovered
    by resume and by rollback (a "during" fault whose kind the plan lacks is skipped)."""
    out: list[Spec] = []
    for fault, target, kind in FAULTS:
        for how in RECOVERIES:
            out.append(Spec("fault-before", credential, how, fault=fault, target=target or ""))
            if kind in kinds:
                out.append(Spec("fault-during", credential, how, kind=kind, fault=fault,
                                target=target or ""))
    return out


def journal_specs(credential: str, kinds: Sequence[str]) -> list[Spec]:
    """A torn record after a kill at each state-changing kind, and a lock taken over at each
    ``TAKE_OVER_AT`` kind the plan has, each recovered by resume and by rollback."""
    out = [Spec("torn", credential, how, kind=kind, sig="kill")
           for kind in kinds if kind not in READ_ONLY for how in RECOVERIES]
    out += [Spec("takeover", credential, how, kind=kind)
            for kind in TAKE_OVER_AT if kind in kinds for how in RECOVERIES]
    if JOURNAL_AT in kinds:  # the journal kept in the cluster: lost by neither
        out += [Spec(what, credential, how, kind=JOURNAL_AT)
                for what in ("journal-down", "machines") for how in RECOVERIES]
    return [*out, Spec("machines", credential, "resume")]


def sharing_specs(main: str, sharing: str, main_kinds: Sequence[str]) -> list[Spec]:
    """``sharing`` (consumers in common, no provider) started at each offset after ``main``,
    recovered by resuming whichever failed; a human edit of an owned pointer of a shared
    consumer's document right before the writes, recovered by resume and by rollback; both
    as one run, killed at each ``SEVERAL_AT`` kind, recovered by resume and by rollback."""
    out = [Spec("sharing", main, "resume", delay_ms=ms, target=sharing)
           for ms in SHARING_OFFSETS_MS]
    svc, kind = HUMAN_EDIT
    if kind in main_kinds:
        out += [Spec("human-edit", main, how, kind=kind, target=svc) for how in RECOVERIES]
    out += [Spec("several", main, how, kind=at, sig="kill", target=sharing)
            for at in SEVERAL_AT if at in main_kinds for how in RECOVERIES]
    return out


def matrix(plans: dict[str, dict[str, Any]], main: str, other: str,
           signals: Sequence[str] = SIGNALS, sharing: str | None = None) -> list[Spec]:
    """The whole matrix: ``main`` at every kind of its plan with every signal and fault;
    ``other`` (same provider) at the kinds ``main``'s plan lacks; both at once; humans;
    ``sharing`` (consumers in common) at several offsets, when given."""
    main_kinds, other_kinds = plan_kinds(plans[main]), plan_kinds(plans[other])
    specs = signal_specs(main, main_kinds, signals)
    specs += fault_specs(main, main_kinds)
    extra = [k for k in other_kinds if k not in main_kinds]
    specs += [Spec("signal", other, how, kind=kind, sig=sig, tagged=True)
              for kind in extra for sig in signals for how in RECOVERIES]
    specs.append(Spec("shared", main, "resume"))
    if "provider.wait" in other_kinds:
        specs.append(Spec("shared", other, "resume", kind="provider.wait", tagged=True))
    if "provider.apply" in main_kinds:
        specs.append(Spec("shared", main, "resume", kind="provider.apply"))
    if "sync.wait" in main_kinds and "provider.apply" in main_kinds:
        specs += [Spec("bao-write", main, how, kind="provider.apply") for how in RECOVERIES]
    if "provider.apply" in main_kinds:  # a live provider: it declares what values it takes
        specs.append(Spec("oversized", main, "resume"))
    for role, target, kind in HUMAN:
        cred = main if role == "main" else other
        if kind in plan_kinds(plans[cred]):
            specs.append(Spec("human", cred, "resume", kind=kind, target=target,
                              tagged=cred != main))
    if sharing is not None and sharing in plans:
        specs += sharing_specs(main, sharing, main_kinds)
    return specs + journal_specs(main, main_kinds) + adopt_specs(main, main_kinds)


def adopt_specs(credential: str, kinds: Sequence[str]) -> list[Spec]:
    """Values rotate did not write: ``--adopt`` with nothing to adopt; ``--adopt`` after a
    ``bao kv put`` killed at each ``ADOPT_AT`` kind; the target Secret changed by hand at
    each ``SECRET_EDIT_AT`` kind — each but the first recovered by resume and by rollback."""
    out = [Spec("adopt-noop", credential, "resume")]
    out += [Spec("adopt", credential, how, kind=kind, sig="kill")
            for kind in ADOPT_AT if kind in kinds for how in RECOVERIES]
    out += [Spec("secret-edit", credential, how, kind=kind)
            for kind in SECRET_EDIT_AT if kind in kinds for how in RECOVERIES]
    out += [Spec("watch-leader", credential, how, kind=kind)
            for kind in WATCH_AT if kind in kinds for how in RECOVERIES]
    return out


def select(specs: Iterable[Spec], only: Sequence[str] | None, shard: tuple[int, int]
           ) -> list[Spec]:
    """Cases whose name contains any of ``only`` (all when empty), then every n-th from i
    (``shard`` = (i, n), 1-based) so n harnesses on n labs share the matrix."""
    chosen = [s for s in specs if not only or any(o in s.name for o in only)]
    i, n = shard
    return chosen[i - 1::n]


def outcomes_of(document: dict[str, Any]) -> list[Outcome]:
    """The outcomes of a faults.json document (a shard's, or a whole matrix's)."""
    return [Outcome(str(c["name"]), list(c["exit_codes"]), str(c.get("reached", "")),
                    list(c["problems"]), float(c["seconds"])) for c in document["cases"]]


def paired(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """Shards' outcomes in one list, a disturbance's resume and rollback next to each other
    (in the order each disturbance first appears)."""
    base = [o.name.rsplit(" → ", 1)[0] for o in outcomes]
    first = {b: base.index(b) for b in base}
    return [o for _, o in sorted(zip(base, outcomes, strict=True),
                                 key=lambda bo: (first[bo[0]], bo[1].name))]


def table(outcomes: Sequence[Outcome]) -> str:
    """The matrix as a Markdown table, then the totals line."""
    rows = [("case", "exit codes", "disturbed at", "consistent", "s", "problems")]
    rows += [(o.name, ", ".join(map(str, o.exit_codes)), o.reached,
              "yes" if o.consistent else "**NO**", f"{o.seconds:.0f}",
              "; ".join(o.problems)) for o in outcomes]
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|---|---|---|---|---|---|")
    bad = [o.name for o in outcomes if not o.consistent]
    total = f"{len(outcomes) - len(bad)}/{len(outcomes)} consistent"
    return "\n".join([*lines, "", total + (f"; inconsistent: {', '.join(bad)}" if bad else "")])
