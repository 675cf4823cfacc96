"""Rollback: put back the values a run replaced, through the whole chain (chain.md).

Built from the original run's journal, never from guesses: the Vault version N it recorded
before writing, the Config Center version each document had before it was written.  The
rollback is a run of its own (operation ``rollback``, own journal, own lock), resumable the
same way as a rotation; when it succeeds the original run is marked ``rolled-back``.

Its steps are the ``undo`` each kind of the original plan declares, in rotation order:
backend.write (restore: version N's data written as a new version) → sync.trigger →
sync.wait (the Secret holds version N's value) → provider.restart/wait → config.write
(restore each recorded previous version, If-Match the version *the run wrote*) → token.mint (fresh
tokens: the run may have revoked the old ones) → consumer.restart/wait → readyz.check.

Nothing that moved since the run is overwritten: :func:`moved_since` lists what
another writer changed after it — a newer run's backend version, a Config Center edit —
and the rollback refuses (exit 3, nothing changed) naming each, unless ``--force``.

Rolling back an overlap run is an overlap itself: the restored value becomes current with
the value being replaced kept as the previous one (consumers still on it keep working while
they move back), then the same phase 2 as a rotation retires it (backend.retire → sync.wait
→ provider.restart/wait).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rotate.chain.model import Chain, Credential
from rotate.clients.seams import ConfigCenter, Vault
from rotate.core.errors import ClientError, NotFoundError, PreflightFailed, UsageError
from rotate.core.strategy import Strategy
from rotate.engine.journal import RunState, StepState
from rotate.engine.kinds import Kind, find, undo_of
from rotate.engine.kinds.base import PlanInput, Restore
from rotate.engine.model import Adapters, Options, Phase, PlannedStep, PreflightResult
from rotate.engine.plan import number_steps
from rotate.engine.unfinished import later_runs
from rotate.stages import backend, documents

if TYPE_CHECKING:
    from rotate.engine.runstore import RunStore


def _writes_value(st: StepState) -> bool:
    kind = find(st.step)
    return kind is not None and kind.writes_value


def _writes_document(st: StepState) -> bool:
    kind = find(st.step)
    return kind is not None and kind.writes_document


def backend_written(vault: Vault, credential: Credential, orig: RunState) -> int | None:
    """N (the version before the run) if the run wrote a version, else None."""
    steps = [s for s in orig.steps if _writes_value(s)]
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
    got = rollback_input(chain, credential, orig, written_from)
    if got is None:
        return [], None, ()
    kinds, inp = got
    assert inp.restore is not None
    return number_steps(kinds, inp), inp.restore, inp.consumers


def rollback_input(
    chain: Chain, credential: Credential, orig: RunState, written_from: int | None
) -> tuple[list[Kind], PlanInput] | None:
    """The kinds a rollback of ``orig`` runs and what they plan from (its ``restore`` and
    consumers included); None when the run changed nothing."""
    if written_from is None:
        return None
    if written_from == 0:
        raise UsageError(f"run {orig.run_id} created {credential.backend.path}; there is no "
                         "previous value to restore")
    moved = _moved_in_waves(orig)
    consumers = tuple(c for c in orig.start.consumers if c in chain.services
                      and (moved is None or c in moved))
    config = _config_before(chain, orig)
    overlap = orig.strategy == Strategy.overlap and credential.overlap is not None
    restore = Restore(written_from, config, overlap)
    readers = tuple(dict.fromkeys(  # the Secret's readers the run restarted, again
        st.step.subject for st in orig.steps if st.step.phase == "main"
        and (kind := find(st.step)) is not None and kind.restarts_reader
        and (moved is None or st.step.subject in moved)))
    inp = PlanInput(chain, credential, Strategy.overlap if overlap else Strategy.restart,
                    PreflightResult(current_version=written_from, consumers=consumers,
                                    reader_restarts=readers,
                                    external_secrets=_synced_others(orig)),
                    restore=restore)
    planned: set[tuple[str, Phase]] = {(s.step.kind, s.step.phase) for s in orig.steps}
    return undo_of(planned), inp


def _moved_in_waves(orig: RunState) -> set[str] | None:
    """A run that moved its consumers in waves behind a canary: the consumers it began to
    move (a stage-④ step of theirs not pending) — the later waves it never reached are left
    untouched by its rollback too.  None for any other run: its rollback moves every
    consumer back, as it always did."""
    if not any((kind := find(st.step)) is not None and kind.divides_waves
               for st in orig.steps):
        return None
    return {st.step.subject for st in orig.steps if st.step.phase == "main"
            and st.step.stage == 4 and st.step.subject and st.status != "pending"}


def _synced_others(orig: RunState) -> tuple[str, ...]:
    """The further ExternalSecrets the run synced: a rollback syncs them again."""
    return tuple(dict.fromkeys(
        st.step.subject for st in orig.steps if st.step.subject and st.step.phase == "main"
        and (kind := find(st.step)) is not None and kind.syncs_external_secret))


def _config_before(chain: Chain, orig: RunState) -> dict[str, int]:
    """service → the version its document had before the run, for each document the run
    wrote or tried to (not its own undo of one)."""
    config: dict[str, int] = {}
    for st in orig.steps:
        if _writes_document(st) and st.step.index not in orig.undo_of \
                and st.status != "pending" and st.data.get("previous_version") is not None \
                and st.step.subject in chain.services:
            config[st.step.subject] = int(st.data["previous_version"])
    return config


def _backend_wrote(orig: RunState, written_from: int) -> int:
    """The last backend version the run wrote (its value, or an overlap's retire)."""
    versions = [int(st.data["version"]) for st in orig.steps
                if st.status == "done" and st.data.get("version") is not None
                and (kind := find(st.step)) is not None and kind.writes_backend]
    return max(versions, default=written_from + 1)


@dataclass(frozen=True)
class _DocWrite:
    """What the run's journal says about one document: the version it last wrote (None:
    unjournaled — it may have, see ``attempts``) and the If-Match of every PUT it tried."""

    version: int | None
    attempts: tuple[int, ...] = ()


def _config_wrote(orig: RunState) -> dict[str, _DocWrite]:
    """service → what the run last wrote to its document.  The run's own undo of a
    document (its restore after a failed stage ③) counts, once done: the run wrote that
    version too.

    "Last" is in the order the steps ran (``started_seq``), not the plan's: a run resumed
    after its undo wrote the new value, then the restore, then the new value again — and
    its journal lists every ``config.write`` before any ``config.undo``."""
    out: dict[str, _DocWrite] = {}
    for st in sorted(orig.steps, key=lambda s: s.started_seq):
        if not _writes_document(st):
            continue
        if st.step.index in orig.undo_of:
            if st.status == "done" and st.data.get("version") is not None:
                out[st.step.subject] = _DocWrite(int(st.data["version"]))
            continue
        if st.step.phase != "main" or st.status == "pending":
            continue
        if st.status == "done" and st.data.get("version") is not None:
            out[st.step.subject] = _DocWrite(int(st.data["version"]))
        elif "previous_version" in st.data:
            lost = {int(a) for a in st.data.get("lost") or []}  # refused with 412
            attempts = [int(a) for a in st.data.get("attempts") or [] if int(a) not in lost]
            if "pointers" not in st.data and st.data.get("previous_version") is not None:
                attempts = [int(st.data["previous_version"])]  # older journals: one PUT
            out[st.step.subject] = _DocWrite(None, tuple(attempts))
    return out


def _later_runs(runs: RunStore, orig: RunState) -> list[str]:
    """Runs of the same credential that changed something after ``orig`` (newest first),
    with their status."""
    return [f"{other.run_id} ("
            + ("rollback of this run" if other.start.of_run == orig.run_id else other.operation)
            + f", {other.status})" for other in later_runs(runs, orig)]


def moved_since(
    chain: Chain, vault: Vault, cc: ConfigCenter, credential: Credential, orig: RunState,
    written_from: int, runs: RunStore,
) -> tuple[list[str], dict[str, int]]:
    """What changed after run ``orig`` among what its rollback would restore, and for each
    document the version whose owned values it must still hold when its restore runs.

    The backend moved when its current version is not the last one the run wrote (and was
    not written by the run itself, unjournaled).  A document moved when a pointer the
    credential owns no longer holds what the run wrote there (or, where the run wrote
    nothing, what it held before the run); another credential's pointers never count — the
    restore writes only the owned ones.  Empty list: the rollback overwrites nothing but the
    run's.
    """
    moved: list[str] = []
    path = credential.backend.path
    wrote = _backend_wrote(orig, written_from)
    current = backend.current_version(vault, path)
    if current != wrote and backend.observe(vault, path, orig.run_id, wrote - 1) != current:
        later = _later_runs(runs, orig)
        moved.append(f"{path}: the run wrote v{wrote}, the backend is now at v{current}"
                     + (f" (later runs: {', '.join(later)})" if later else
                        " (written by someone else)"))
    match: dict[str, int] = {}
    before = _config_before(chain, orig)
    for name, wrote_doc in _config_wrote(orig).items():
        if name not in chain.services:
            continue
        found = _document_moved(cc, chain, credential, name, wrote_doc,
                                restore_from=before.get(name))
        if isinstance(found, str):
            moved.append(found)
        elif found is not None:
            match[name] = found
    return moved, match


def _document_moved(
    cc: ConfigCenter, chain: Chain, credential: Credential, name: str, wrote: _DocWrite,
    restore_from: int | None,
) -> str | int | None:
    """Whether the pointers the credential owns in ``name``'s document still hold what the
    run left there: the version to compare them with at restore time (they do; the version
    from before the run when they hold its values, so the restore writes nothing), None
    (the run recorded no version before it), or why not (they moved).  Other pointers never
    count: they are not the rollback's to restore."""
    svc = chain.services[name]
    doc = f"Config Center document {name}/{svc.config_key}"
    pointers = documents.owned_pointers(svc, credential.secret)
    try:
        current = cc.get_key(name, svc.config_key)
    except NotFoundError:
        return f"{doc}: no longer exists"
    now = documents.owned_values(current.value, pointers)
    if restore_from is not None:
        old = documents.owned_values(cc.get_version(name, svc.config_key, restore_from).value,
                                     pointers)
        if not documents.moved(pointers, now, old):
            return restore_from  # holds the values from before the run: nothing to restore
    version = wrote.version
    if version is None:  # a PUT may have been applied unjournaled: version If-Match + 1
        version = documents.may_have_written(cc, name, svc.config_key, pointers,
                                             wrote.attempts)
    if version is None:
        shown = ", ".join(documents.moved(pointers, now, old)) if restore_from is not None \
            else ", ".join(pointers)
        return (f"{doc}: {shown} changed after the run read v{restore_from} (now "
                f"v{current.version}), not by the run (it wrote nothing there)")
    ref = documents.owned_values(cc.get_version(name, svc.config_key, version).value, pointers)
    changed = documents.moved(pointers, now, ref)
    if changed:
        return (f"{doc}: {', '.join(changed)} edited after the run wrote v{version} (now "
                f"v{current.version})")
    return version


def guard(
    chain: Chain, cred: Credential, adapters: Adapters, orig: RunState,
    written_from: int, restore: Restore, options: Options, runs: RunStore,
) -> Restore:
    """Refuse (exit 3, nothing changed) when something the rollback would restore moved
    since the run; the restore with each document's If-Match the version the run wrote."""
    try:
        moved, match = moved_since(chain, adapters.vault, adapters.config_center, cred, orig,
                                   written_from, runs)
    except ClientError as exc:
        raise PreflightFailed(f"cannot check what moved since run {orig.run_id}: "
                              f"{exc.message}; nothing was changed") from None
    if moved and not options.force:
        raise PreflightFailed(
            f"rollback of {orig.run_id} refused, nothing was changed: it would overwrite "
            "what moved since the run — " + "; ".join(moved),
            hint=f"roll back the later run first, or re-run `rotate rollback {orig.run_id} "
                 "--confirm --force` to overwrite these changes")
    return dataclasses.replace(restore, config_match=match)
