"""① ``backend.confirm``: the run's last step proves the backend still holds the version the
run wrote, so "succeeded" means what docs/reliability.md promises — one value everywhere.

Why a step of its own: every other step proves its own link at the moment it ran, and the
backend was proven once, by ``backend.write``'s check-and-set, at the run's start.  Someone
writing the path afterwards (a ``bao kv put``, another tool) is invisible to the later
steps once ``sync.wait`` has passed: the provider and the documents then hold the run's
value while OpenBao's current version — and soon, at ESO's next refresh, the Secret —
holds another.  This step reads the path's metadata once more, after everything else.

* **Rotation**: the expected version is the last this run wrote — ``backend.retire``'s
  under overlap, else ``backend.write``'s.  A rollback's form is the same kind (``undo =
  ITSELF``, run last): it proves the restored version (or its retire) is still current.
* **Failure** (the backend moved on): exit 17, a message naming the version the run wrote,
  the current one, when that one was created and when it was read; nothing is undone — the
  provider and every consumer hold the run's value, consistently with each other, so
  undoing the consumers would only split them.  The way on: put the run's version back as
  the current one (``bao kv rollback -version=N``: the other write stays in the history),
  then ``resume`` — the proof accepts a current version that holds exactly the data the run
  wrote — or, once it is back, ``rollback --force`` (a rollback straight from the other
  write would take that value for the one to replace, which a live provider never held).
  ``rotate CREDENTIAL --adopt --confirm --force`` is the way to keep the other value
  instead: it carries the other write's value through the chain (rotate.engine.adoption;
  ``--force``: this run is left unfinished); ``rotate status`` will show the same drift.
* **Idempotent**: a proof, repeated on every attempt and on resume, never remembered.
* **An adopt run** (``--adopt``) also names the proven version as rotate's in the path's
  custom metadata (``rotate-version``) once proven: the whole chain holds it now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.errors import EXIT_BACKEND_MOVED, StepFailed
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.timestamps import rfc3339, utcnow
from rotate.engine.kinds import objects
from rotate.engine.kinds.backend_retire import BackendRetire
from rotate.engine.kinds.backend_write import written_version
from rotate.engine.kinds.base import (
    ITSELF,
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
    Told,
)
from rotate.engine.targets import backend_target
from rotate.stages import backend


@dataclass(frozen=True)
class Confirmed(StepData):
    version: int  # the version the run wrote, still the current one
    read_at: str  # RFC 3339, when the metadata was read


def last_written(run: Run) -> int | None:
    """The last version this run put in the backend: the retire's, else the write's."""
    retired = run.result(BackendRetire)
    return retired.version if retired is not None else written_version(run)


class BackendConfirm(StepKind[Confirmed]):
    name: ClassVar[str] = "backend.confirm"
    stage: ClassVar[int] = 1
    exit_code: ClassVar[int] = EXIT_BACKEND_MOVED
    result: ClassVar[type[StepData]] = Confirmed
    #: a rollback ends with the same proof, for the version it restored
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    rollback_last: ClassVar[bool] = True
    undoes_prepared: ClassVar[bool] = False
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"failed": (Told.BACKEND_UNCONFIRMED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.external_secret(run)  # proves only: a Warning when it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        what = ("the restored version" if inp.restore is not None
                else "the adopted version" if inp.adopt is not None
                else "the version this run wrote")
        yield Draft(backend_target(inp.chain, inp.credential),
                    f"{what} is still the current one (nobody wrote the path since)")

    def observe(self, run: Run, io: StepIO) -> Outcome[Confirmed] | None:
        return None  # a proof is repeated, never remembered

    def act(self, run: Run, io: StepIO) -> Outcome[Confirmed]:
        return Outcome(Confirmed(0, ""), "")

    def prove(self, run: Run, io: StepIO, acted: Outcome[Confirmed]) -> Outcome[Confirmed]:
        wrote = last_written(run)
        if wrote is None:
            raise StepFailed("backend.confirm runs after the backend write, which is not done")
        vault = run.adapters.vault
        meta = vault.read_metadata(run.path)
        read_at = rfc3339(utcnow(), micro=False)
        current = meta.current_version
        if current == wrote:
            _adopted(run, wrote)
            return Outcome(Confirmed(wrote, read_at),
                           f"v{wrote} is still the current version (read at {read_at})")
        if current > wrote and _same(vault.read(run.path, current), vault.read(run.path, wrote)):
            _adopted(run, current)
            return Outcome(Confirmed(current, read_at),
                           f"v{current} holds what this run wrote as v{wrote} (read at "
                           f"{read_at})")
        raise StepFailed(_moved(run, wrote, current, read_at,
                                _created(meta.versions, current)),
                         next_step=_way_out(run, wrote, current))


def _adopted(run: Run, version: int) -> None:
    """An ``--adopt`` run whose chain now holds ``version`` names it as rotate's in the
    path's custom metadata (``rotate-version``), as a write does, so that the next
    ``--adopt`` finds nothing to adopt (rotate.engine.adoption).  Only here, at the end: a run
    stopped half-way must leave the version the rest of the chain may still hold."""
    if run.start.adopted is not None and run.start.operation == "rotate":
        backend.adopt(run.adapters.vault, run.path, run.run_id, version)


def _same(a: Mapping[str, Secret], b: Mapping[str, Secret]) -> bool:
    """The two versions hold the same keys and values (compared in constant time)."""
    return a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def _created(versions: Mapping[int, Any], version: int) -> str:
    found = versions.get(version)
    created = getattr(found, "created_time", "") if found is not None else ""
    return f", created at {created}" if created else ""


def _moved(run: Run, wrote: int, current: int, read_at: str, created: str) -> str:
    path = backend_target(run.chain, run.credential)
    return (f"the backend moved on during the run: this run wrote v{wrote} of {path}, but "
            f"its current version is v{current}{created} (read at {read_at}) and holds "
            "other data; someone else wrote the path after this run did, so the provider and "
            f"the consumers' documents hold this run's value while the backend holds "
            f"v{current}'s, which ESO copies into the Secret at its next refresh")


def _way_out(run: Run, wrote: int, current: int) -> str:
    mount, path = run.chain.backend.kv_mount, run.credential.backend.path
    return (f"What to do: put this run's version back as the current one with `bao kv "
            f"rollback -mount={mount} -version={wrote} {path}` (v{current} stays in the "
            f"history), then `rotate resume {run.run_id} --confirm` proves it and finishes "
            "the run; or, once it is back, undo the run with `rotate rollback "
            f"{run.run_id} --confirm --force` (--force: the version number moved since the "
            "run; add the same --chain/--state-dir options as this run). To keep "
            f"v{current}'s value instead, `rotate {run.credential.name} --adopt --confirm "
            f"--force` carries it through the chain with no new version (--force: this run "
            "is then left unfinished for good).")
