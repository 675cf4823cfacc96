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
"""

from __future__ import annotations

from collections.abc import Sequence

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
