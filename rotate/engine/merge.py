"""A run of several credentials: their plans merged into one (chain.md "Several credentials").

``rotate dragonfly postgres`` is one run — one run id, one journal, one Lease per credential
— whose steps are each credential's own plan (rotate.engine.plan), merged.  Pure, like the
plan builder: the merged plan printed without ``--confirm`` is what ``--confirm`` runs.

The rules, and why:

* **Each credential keeps its order.**  The merge is a k-way merge of the credentials' own
  ordered steps: a credential's steps are never reordered among themselves, so every proof
  a step relies on (its backend write before its sync, its sync before its provider) holds
  as it does in a run of that credential alone.  Among the credentials' next steps the one
  of the lowest *rank* goes first (ties: the credentials in the order given, sorted by the
  CLI), so the same stage of every credential runs together.
* **A consumer moves once.**  A kind that acts on a consumer itself (``one_per_consumer``:
  its tokens, its rollout, its readiness) is planned once per consumer, by its *owner* —
  the first credential that consumes it; the document steps stay per credential (each
  writes only the pointers its credential owns, rotate.stages.documents).  Ranks put every
  credential's document write before the one restart, and every provider's switch before
  the consumer's rollout is proven and its readiness checked.
* **Restart** (consumers prepared before the switch, chain.md "Order") generalises as:
  every backend write first; then the consumers' documents, tokens and rollouts — prepared
  with *every* new value — beside the syncs; then every provider switches, one right after
  the other; then each consumer's new pods become Ready, which they can only do once every
  provider they read took its value.  A consumer of two credentials is unready between the
  two switches as it is during one: the switches run back to back to keep that window to
  the second switch's own duration.
* **Overlap**: every provider accepts both values, every consumer moves once, then every
  credential retires its old value — ranks by rotation order do exactly that.
* **Both at once** (each credential keeps its own strategy: ``dragonfly`` restart,
  ``postgres`` overlap in the lab): the overlap credentials first take their new value on
  their providers *beside* the old one (nothing refuses anything yet); then every
  consumer's documents, tokens and rollouts are prepared, the restart credentials' beside
  their syncs; then the restart credentials switch; then every consumer's readiness is
  proven; then the overlap credentials retire their old values.  A consumer of both restarts
  once, with both new values, and is unready only for the restart switch's readiness
  period — as with that credential alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from rotate.chain.model import Chain, Credential
from rotate.core.errors import UsageError
from rotate.core.findings import Check, Trap
from rotate.core.strategy import Strategy
from rotate.engine.journal import RunState
from rotate.engine.kinds import ROTATION, Kind, find
from rotate.engine.kinds.base import Draft, PlanInput
from rotate.engine.member import JOIN
from rotate.engine.model import Plan, PlannedStep, PreflightResult

Drafted = tuple[str, Kind, Draft]  # (credential, kind, draft)


def joined(names: Sequence[str]) -> str:
    return JOIN.join(names)


def distinct(names: Sequence[str]) -> tuple[str, ...]:
    """The credentials of a run, sorted (the order of their Leases, their steps' ties, their
    run id); UsageError (exit 2) for a name given twice."""
    seen = sorted(names)
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise UsageError(f"credential {', '.join(twice)} given more than once")
    return tuple(seen)


def _slot(kind: Kind, draft: Draft, restart: bool, mixed: bool, sync_at: int,
          at: int) -> int:
    """Where a step sits among the stages of a merged plan (module doc).

    A ``restart`` credential's: 0 its backend write and trigger, 1 its consumers prepared
    beside the syncs, 2 its sync wait, 3 the Secret's readers restarted once every Secret is
    proven, 4 its switch, 5 the rest.  An ``overlap`` credential's beside a ``restart`` one
    (``mixed``): 0 everything up to its provider taking both values, 1 its consumers'
    documents, tokens and rollouts, 5 the rest — its retire ranks after every consumer's
    readiness, by rotation order.  Credentials that all overlap: rotation order."""
    early = kind.phase == "main" and not draft.late
    if not restart:
        if not mixed or kind.phase != "main":
            return 0
        if early and kind.prepares:
            return 1
        return 0 if at < sync_at or kind.syncs or kind.stage == 3 else 5
    if early and kind.prepares:
        return 1
    if kind.syncs:
        return 2
    if early and kind.prepares_after_sync:
        return 3
    if at < sync_at:
        return 0
    return 4 if kind.stage == 3 else 5


def owners(members: Sequence[tuple[str, Sequence[tuple[Kind, Draft]]]]) -> dict[str, str]:
    """consumer → the credential that plans its ``one_per_consumer`` steps: the first that
    plans any."""
    out: dict[str, str] = {}
    for name, drafted in members:
        for kind, draft in drafted:
            if kind.one_per_consumer and draft.subject:
                out.setdefault(draft.subject, name)
    return out


def merge_drafts(members: Sequence[tuple[str, Sequence[tuple[Kind, Draft]]]],
                 kinds: Sequence[Kind], *, restart: Sequence[str] = ()) -> list[Drafted]:
    """The credentials' ordered drafts as one list (module doc): each credential's order
    kept, the lowest rank first, the ``one_per_consumer`` steps of a consumer kept for its
    owner only.  ``kinds``: every kind in the order that ranks them (ROTATION, or the
    rollback's undo kinds); ``restart``: the credentials whose consumers are prepared
    before their switch (a rotation's under the restart strategy)."""
    order = {kind: i for i, kind in enumerate(kinds)}
    mixed = bool(restart) and any(name not in restart for name, _ in members)
    sync_at = next((i for i, kind in enumerate(kinds) if kind.syncs), len(kinds))
    owner = owners(members)
    lists = [[(name, kind, draft) for kind, draft in drafted
              if not (kind.one_per_consumer and draft.subject
                      and owner.get(draft.subject, name) != name)]
             for name, drafted in members]

    def rank(item: Drafted) -> tuple[int, int]:
        name, kind, draft = item
        at = order.get(kind, len(kinds))
        return _slot(kind, draft, name in restart, mixed, sync_at, at), at

    heads = [0] * len(lists)
    out: list[Drafted] = []
    while True:
        ready = [(rank(lst[heads[i]]), i) for i, lst in enumerate(lists) if heads[i] < len(lst)]
        if not ready:
            return out
        _, i = min(ready)
        out.append(lists[i][heads[i]])
        heads[i] += 1


def number(merged: Sequence[Drafted]) -> list[PlannedStep]:
    """The merged drafts as the run's steps, numbered from 1, each naming its credential."""
    return [PlannedStep(i, kind.stage, kind.name, draft.target, draft.detail, draft.subject,
                        kind.phase, credential=name)
            for i, (name, kind, draft) in enumerate(merged, start=1)]


def _ours(name: str, check: Check) -> Check:
    return Check(check.check, check.ok, f"{name}: {check.detail}", check.fatal)


def _trap(name: str, trap: Trap) -> Trap:
    return Trap(trap.name, trap.target, f"{name}: {trap.problem}", trap.action, trap.blocking)


def build_merged_plan(chain: Chain, credentials: Sequence[Credential],
                      strategies: Mapping[str, Strategy],
                      observed: Mapping[str, PreflightResult]) -> Plan:
    """The plan of a run of ``credentials`` (sorted, at least two), each with its strategy:
    each one's own plan as a member, their steps merged."""
    from rotate.engine.plan import build_plan, ordered_drafts

    plans = [build_plan(chain, c, strategies[c.name], observed[c.name]) for c in credentials]
    inputs = [PlanInput(chain, c, strategies[c.name], observed[c.name]) for c in credentials]
    drafted = [(inp.credential.name, ordered_drafts(ROTATION, inp)) for inp in inputs]
    restart = [inp.credential.name for inp in inputs if inp.prepare_first]
    steps = number(merge_drafts(drafted, ROTATION, restart=restart))
    first = plans[0]
    readers: dict[str, str] = {}
    for p in plans:
        readers.update(p.readers)
    return Plan(
        credential=joined([p.credential for p in plans]), strategy=first.strategy,
        consumers=tuple(dict.fromkeys(c for p in plans for c in p.consumers)),
        providers=tuple(dict.fromkeys(x for p in plans for x in p.providers)),
        backend_path=first.backend_path, current_version=first.current_version,
        preflight=tuple(_ours(p.credential, c) for p in plans for c in p.preflight),
        traps=tuple(_trap(p.credential, t) for p in plans for t in p.traps),
        steps=tuple(steps), readers=readers, members=tuple(plans))


def member_state(state: RunState, name: str) -> RunState:
    """What the journal of a run of several credentials says of member ``name``, as a run
    of that credential alone would say it: its own start, its own steps, and the
    ``one_per_consumer`` steps on its consumers (whichever credential planned them)."""
    start = state.start.member(name)
    mine = set(start.consumers)

    def ours(step: PlannedStep) -> bool:
        kind = find(step)
        return step.credential == name or (step.subject in mine and kind is not None
                                           and kind.one_per_consumer)

    return dataclasses.replace(state, start=start,
                               steps=[st for st in state.steps if ours(st.step)])
