"""How a plan's steps are scheduled: groups, lanes, and the groups run beside sync.wait.

Pure functions of the planned steps and their kinds (rotate.engine.kinds); the executor runs
what they return.

* Consecutive steps of a kind declared ``parallel`` form a **group**, run with bounded
  parallelism (``max_parallel`` threads); consecutive parallel steps of kinds that share a
  ``lane`` form one group too, run per consumer (:func:`lanes`): each consumer's steps in
  plan order on one thread (its document before its restart; its rollout proven before its
  readyz, its readyz before its old tokens are revoked), consumers independent of one
  another — so no consumer waits for the slowest of a whole kind before its next step.
* The groups of ``prepares`` steps planned right before a ``syncs`` step (restart strategy:
  the token mints, the harvest, each consumer's document and restart before sync.wait,
  rotate.engine.plan) run **beside** it (:func:`beside`): the consumers' new pods start
  while ESO reacts.
* In a run of several credentials (rotate.engine.merge), consecutive steps of stages ①–③
  — each credential's backend, sync and provider chain, which touch that credential's own
  path, Secrets and providers — run **per credential** (:func:`chain_run`,
  :func:`by_credential`): each credential's steps in plan order on one thread, the
  credentials at once, so neither waits for the other's sync or switch.  The consumer steps
  around them stay barriers: a consumer still moves after every provider it reads took
  its value, once.  The executor does so only for credentials whose providers are
  disjoint (two credentials on one provider keep the merged order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rotate.engine.kinds import Kind, kind_of
from rotate.engine.model import PlannedStep


def groups_of(steps: Sequence[PlannedStep]) -> list[list[PlannedStep]]:
    """``steps`` in order, consecutive parallel steps of one kind (or one lane) as a group,
    every other step a group of its own."""
    groups: list[list[PlannedStep]] = []
    for step in steps:
        if groups and _joins(kind_of(groups[-1][0]), kind_of(step)):
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _joins(first: Kind, kind: Kind) -> bool:
    """Whether a step of ``kind`` joins the group whose first step is of ``first``."""
    if not (first.parallel and kind.parallel):
        return False
    return first is kind or (first.lane is not None and first.lane == kind.lane)


def beside(groups: Sequence[Sequence[PlannedStep]], i: int) -> int:
    """How many groups from ``groups[i]`` run beside the group after them: groups of
    ``prepares`` steps right before the one step of a ``syncs`` kind; 0 when ``groups[i]``
    is not the first of such a run.  The kinds alone say so: only a rotation under the
    restart strategy plans ``prepares`` steps before sync.wait."""
    j = i
    while j < len(groups) and all(kind_of(step).prepares for step in groups[j]):
        j += 1
    if j == i or j == len(groups):
        return 0
    return j - i if waits(groups, j) else 0


def waits(groups: Sequence[Sequence[PlannedStep]], j: int) -> int:
    """How many groups from ``groups[j]`` are one step of a ``syncs`` kind each: the waits
    the prepared steps run beside (one per credential of the run: rotate.engine.merge)."""
    n = 0
    while j + n < len(groups) and len(groups[j + n]) == 1 and kind_of(groups[j + n][0]).syncs:
        n += 1
    return n


def lanes(group: Sequence[PlannedStep]) -> list[list[PlannedStep]]:
    """The group's units of work, in plan order: one step each for a group of one kind; for a
    lane group, each subject's steps in plan order."""
    if all(kind_of(s) is kind_of(group[0]) for s in group):
        return [[s] for s in group]
    by_subject: dict[str, list[PlannedStep]] = {}
    for step in group:
        by_subject.setdefault(step.subject, []).append(step)
    return list(by_subject.values())


def chain_run(groups: Sequence[Sequence[PlannedStep]], i: int) -> int:
    """How many groups from ``groups[i]`` hold only stage ①–③ steps of named credentials,
    when they span more than one credential (0 otherwise: nothing to run side by side)."""
    j = i
    while j < len(groups) and all(step.credential and kind_of(step).stage <= 3
                                  for step in groups[j]):
        j += 1
    names = {step.credential for group in groups[i:j] for step in group}
    return j - i if len(names) > 1 else 0


def by_credential(groups: Sequence[Sequence[PlannedStep]]) -> list[list[PlannedStep]]:
    """The steps of ``groups`` as one lane per credential, each in plan order."""
    out: dict[str, list[PlannedStep]] = {}
    for group in groups:
        for step in group:
            out.setdefault(step.credential, []).append(step)
    return list(out.values())


def independent(groups: Sequence[Sequence[PlannedStep]],
                providers_of: Callable[[PlannedStep], Iterable[object]]) -> bool:
    """Whether the credentials of ``groups`` share no provider (``providers_of`` a step:
    its credential's), so their chains may run at once."""
    seen: set[str] = set()
    for name in dict.fromkeys(step.credential for group in groups for step in group):
        first = next(step for group in groups for step in group if step.credential == name)
        providers = {str(ref) for ref in providers_of(first)}
        if providers & seen:
            return False
        seen |= providers
    return True
