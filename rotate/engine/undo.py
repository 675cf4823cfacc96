"""Undo what a failing run prepared ahead of the stage that failed (chain.md "Order").

Under the restart strategy the consumers are prepared before stage ③: documents written,
tokens minted, new consumer pods started that wait, unready, for the provider.  If a step of
an earlier stage then fails — the provider's rollout never completes, or it refuses the new
value — those prepared steps must not stay behind: a document holding a value the provider
does not accept would break the next pod start of that consumer, and its unready new pods
would block its rollout.

The rule is general, by stage and plan order, so any stage-③ kind gets it: when a step
fails, every *done* step of the same phase that was planned before it but belongs to a later
stage (it was prepared ahead of the failed one), not already undone, and whose kind declares
a ``compensate`` kind, is undone by one new step of that kind — unless the failed step's kind
says ``undoes_prepared = False`` (the run's last proof, ``backend.confirm``: every link the
run changed holds its value, and undoing the consumers would split them).  The undo steps run in the
order of what they undo — documents restored first, then rollouts settled back — so a pod
the settling rollout starts anew (an old ReplicaSet already pruned) reads the old document;
they are numbered after every step the journal knows, and are journaled like any step: a
``run.undo`` record lists them first, so a ``kill -9`` at any boundary leaves a run whose
``resume`` finishes the undo (rotate.engine.api).  Tokens have no compensation: the old
token stays valid until ``token.revoke``, the run's last step.

A run of several credentials (rotate.engine.merge) undoes what it prepared only while no
provider has switched: once one took its new value, its consumers' prepared documents and
pods are what that provider accepts now, and undoing them would break them.  The run then
ends failed with nothing undone; ``resume`` retries the failed switch (the consumers'
new pods wait for it, unready), ``rollback`` puts every credential back as one unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rotate.engine.journal import RunState, StepState
from rotate.engine.kinds import find, kind_of
from rotate.engine.model import PlannedStep


@dataclass(frozen=True)
class UndoPlan:
    """The undo steps of one failure, and what the ``run.undo`` record says of them."""

    steps: tuple[PlannedStep, ...]
    undoes: dict[int, int]  # undo step index → prepared step index
    seeds: dict[int, dict[str, Any]]  # undo step index → the prepared step's journaled data

    def record(self, cause: dict[str, Any]) -> dict[str, Any]:
        return {"cause": cause, "steps": [s.to_json() for s in self.steps],
                "undoes": {str(k): v for k, v in self.undoes.items()},
                "seeds": {str(k): v for k, v in self.seeds.items()}}


def _undoable(state: RunState, st: StepState) -> bool:
    """Not undone yet, not an undo step, and its kind knows how to undo it."""
    return (st.step.index not in state.undone and st.step.index not in state.undo_of
            and kind_of(st.step).compensate is not None)


def _changed(st: StepState) -> bool:
    """Done, or failed after journaling what its undo needs (it may have changed the world
    before failing: a consumer.restart whose new pods never started)."""
    needs = kind_of(st.step).compensate_failed
    return st.status == "done" or (st.status == "failed" and needs is not None
                                   and needs in st.data)


def prepared_ahead(state: RunState, failed: PlannedStep) -> list[StepState]:
    """Steps planned ahead of ``failed``'s stage that a kind knows how to undo.

    When ``failed`` is itself a prepared step (RunStart.prepared: its rollout's pods never
    started, say), the provider has not switched: every prepared step that changed something
    is undone — its siblings of a parallel group, planned after it too, and itself."""
    start = state.start
    if not kind_of(failed).undoes_prepared:
        return []
    if start.prepared(failed):
        return [st for st in state.steps
                if start.prepared(st.step) and _changed(st) and _undoable(state, st)]
    if start.members and any(st.status == "done" and st.step.stage == 3
                             and st.step.phase == failed.phase for st in state.steps):
        return []  # several credentials, one provider switched: see the module doc
    return [st for st in state.steps
            if st.status == "done" and st.step.index < failed.index
            and st.step.stage > failed.stage and st.step.phase == failed.phase
            and _undoable(state, st)]


def plan_undo(state: RunState, failed: PlannedStep) -> UndoPlan:
    """The steps that undo what was prepared ahead of ``failed`` (none: nothing to undo)."""
    ahead = prepared_ahead(state, failed)
    index = max((st.step.index for st in state.steps), default=0)
    steps: list[PlannedStep] = []
    undoes: dict[int, int] = {}
    seeds: dict[int, dict[str, Any]] = {}
    for st in sorted(ahead, key=lambda s: s.step.index):
        comp = kind_of(st.step).compensate
        assert comp is not None  # prepared_ahead keeps only kinds that have one
        index += 1
        steps.append(PlannedStep(index, comp.stage, comp.name, st.step.target,
                                 f"undo step {st.step.index} ({st.step.kind})",
                                 st.step.subject, comp.phase, st.step.credential))
        undoes[index] = st.step.index
        seeds[index] = {k: v for k, v in st.data.items() if k not in ("detail", "seconds")}
    return UndoPlan(tuple(steps), undoes, seeds)


def pending_undo(state: RunState) -> list[PlannedStep]:
    """The steps of the latest ``run.undo`` not done yet (a resume finishes them first)."""
    by_index = {st.step.index: st for st in state.steps}
    return [by_index[i].step for i in state.undo_round if by_index[i].status != "done"]


def summary(state: RunState) -> str:
    """What the undo of the latest round put back, in plain words (each compensation's
    ``undone_words``), told in the reverse of the order the kinds ran: the rollouts settled
    back last are said first, then the documents they read."""
    by_index = {st.step.index: st for st in state.steps}
    done = [by_index[i] for i in state.undo_round if by_index[i].status == "done"]
    subjects: dict[str, list[str]] = {}  # words → subjects, in the order the kinds ran
    for st in done:
        kind = find(st.step)
        if kind is not None and kind.undone_words is not None:
            subjects.setdefault(kind.undone_words, []).append(st.step.subject)
    return " and ".join(words.format(", ".join(sorted(names)))
                        for words, names in reversed(subjects.items()))
