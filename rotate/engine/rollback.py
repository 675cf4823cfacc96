"""Rollback: put back the values a run replaced, through the whole chain (chain.md).

Built from the original run's journal, never from guesses: the Vault version N it recorded
before writing, the Config Center version each document had before it was written.  The
rollback is a run of its own (operation ``rollback``, own journal, own lock), resumable the
same way as a rotation; when it succeeds the original run is marked ``rolled-back``.

Its steps are the ``undo`` each kind of the original plan declares, in rotation order:
backend.write (restore: version N's data written as a new version) → sync.trigger →
sync.wait (the Secret holds version N's value) → provider.restart/wait → config.write
(restore each recorded previous version, If-Match the current one) → token.mint (fresh
tokens: the run may have revoked the old ones) → consumer.restart/wait → readyz.check.

Rolling back an overlap run is an overlap itself: the restored value becomes current with
the value being replaced kept as the previous one (consumers still on it keep working while
they move back), then the same phase 2 as a rotation retires it (backend.retire → sync.wait
→ provider.restart/wait).
"""

from __future__ import annotations

from rotate.chain.model import Chain, Credential
from rotate.clients.seams import Vault
from rotate.core.errors import UsageError
from rotate.core.strategy import Strategy
from rotate.engine.journal import RunState
from rotate.engine.kinds import undo_of
from rotate.engine.kinds.base import PlanInput, Restore
from rotate.engine.model import Phase, PlannedStep
from rotate.engine.plan import number_steps
from rotate.stages import backend


def backend_written(vault: Vault, credential: Credential, orig: RunState) -> int | None:
    """N (the version before the run) if the run wrote a version, else None."""
    steps = [s for s in orig.steps if s.step.kind == "backend.write"]
    if not steps:
        return None
    st = steps[0]
    if "previous_version" not in st.data:
        return None
    n = int(st.data["previous_version"])
    if st.status == "done":
        return n
    if backend.observe(vault, credential.backend.path, orig.run_id, n) is not None:
        return n
    return None


def build_rollback(
    chain: Chain, credential: Credential, orig: RunState, written_from: int | None
) -> tuple[list[PlannedStep], Restore | None, tuple[str, ...]]:
    """The rollback steps, what they restore, and the consumers they roll;
    ([], None, ()) when the run changed nothing."""
    if written_from is None:
        return [], None, ()
    if written_from == 0:
        raise UsageError(f"run {orig.run_id} created {credential.backend.path}; there is no "
                         "previous value to restore")
    consumers = tuple(c for c in orig.start.consumers if c in chain.services)
    config: dict[str, int] = {}
    for st in orig.steps:
        if st.step.kind == "config.write" and st.status != "pending" and st.data.get(
                "previous_version") is not None and st.step.subject in chain.services:
            config[st.step.subject] = int(st.data["previous_version"])
    overlap = orig.strategy == Strategy.overlap and credential.overlap is not None
    restore = Restore(written_from, config, overlap)
    inp = PlanInput(chain, credential, Strategy.overlap if overlap else Strategy.restart,
                    consumers, current_version=written_from, restore=restore)
    planned: set[tuple[str, Phase]] = {(s.step.kind, s.step.phase) for s in orig.steps}
    return number_steps(undo_of(planned), inp), restore, consumers
