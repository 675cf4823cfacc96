"""Issue 10: a shared provider is locked, rollbacks refuse to lose data, resume keeps an
operator-supplied value, tokens minted by a run are never left live."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rotate.core.errors import LockHeld, PreflightFailed
from rotate.core.waiting import CancelToken
from rotate.engine.lock import provider_lease_name
from tests.fakes import World
from tests.support.engine import (
    RecordingObserver,
    options,
    resume,
    rollback,
    run,
)


def _provider_lease(world: World, holder: str) -> str:
    ref = world.chain.credentials["dragonfly"].providers[0]
    name = provider_lease_name(ref)
    world.kube.put({"kind": "Lease", "metadata": {"name": name, "namespace": "rotate-system"},
                    "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                             "renewTime": datetime.now(UTC).strftime(
                                 "%Y-%m-%dT%H:%M:%S.%fZ")}})
    return name


def test_a_run_on_a_shared_provider_exits_4_naming_the_holder(
    world: World, tmp_path: Path
) -> None:
    """Another credential (dragonfly-acl) rolling the same Dragonfly holds its Lease."""
    name = _provider_lease(world, "carol@host/20261203T000000Z-dragonfly-acl-abcd")
    with pytest.raises(LockHeld) as exc:
        run(world, tmp_path)
    assert exc.value.exit_code == 4
    assert "dragonfly-acl" in exc.value.message and name in exc.value.message
    assert world.vault.writes == 0
    # the credential's own Lease, taken first, was given back
    assert ("Lease", "rotate-system", "rotate-dragonfly") not in world.kube.objects


def test_a_run_holds_its_providers_lease_and_releases_it(world: World, tmp_path: Path) -> None:
    ref = world.chain.credentials["dragonfly"].providers[0]
    seen: list[bool] = []
    original = world.vault.write

    def write(*a: object, **kw: object) -> int:
        seen.append(("Lease", "rotate-system", provider_lease_name(ref)) in world.kube.objects)
        return original(*a, **kw)  # type: ignore[arg-type]

    world.vault.write = write  # type: ignore[method-assign]
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    assert seen and all(seen)
    assert ("Lease", "rotate-system", provider_lease_name(ref)) not in world.kube.objects


# ---------------------------------------------------------------- rollback refuses to lose data


def _snapshot(world: World) -> tuple[int, dict[str, int]]:
    return (len(world.vault.versions["infra/dragonfly"]),
            {name: len(world.cc.docs[(name, "bootstrap")]) for name in ("cart", "order", "user")})


def test_rolling_back_an_older_run_after_a_newer_one_refuses(
    world: World, tmp_path: Path
) -> None:
    older = run(world, tmp_path)
    newer = run(world, tmp_path)
    assert older.status == newer.status == "succeeded"
    before = _snapshot(world)
    with pytest.raises(PreflightFailed) as exc:
        rollback(world, tmp_path, older.run_id)
    assert exc.value.exit_code == 3
    assert newer.run_id in exc.value.message and "nothing was changed" in exc.value.message
    assert "--force" in (exc.value.hint or "")
    assert _snapshot(world) == before
    assert world.engine().show(options(tmp_path), newer.run_id).status == "succeeded"
    # the newest one rolls back fine
    assert rollback(world, tmp_path, newer.run_id).status == "succeeded"


def _owned_edit(world: World, name: str = "order") -> dict[str, object]:
    """A human's edit of a pointer the dragonfly credential owns (its password)."""
    last = world.cc.docs[(name, "bootstrap")][-1]
    edited = {**last, "dragonfly": {**last["dragonfly"], "password": "set-by-a-human-" + "x" * 32}}
    world.cc.docs[(name, "bootstrap")].append(edited)
    return edited


def test_a_config_center_edit_after_the_run_is_not_overwritten(
    world: World, tmp_path: Path
) -> None:
    """An edit of an owned pointer refuses the rollback; --force restores only the owned
    pointers, keeping every other one as the edit left it."""
    report = run(world, tmp_path)
    edited = _owned_edit(world)
    edited["note"] = "kept"  # a pointer dragonfly does not own, in the same edit
    before = _snapshot(world)
    with pytest.raises(PreflightFailed) as exc:
        rollback(world, tmp_path, report.run_id)
    assert "order/bootstrap" in exc.value.message and "edited after the run" in exc.value.message
    assert "/dragonfly/password" in exc.value.message
    assert _snapshot(world) == before and world.cc.docs[("order", "bootstrap")][-1] == edited
    forced = world.engine().rollback(options(tmp_path, force=True), report.run_id,
                                     RecordingObserver(), CancelToken())
    assert forced.status == "succeeded", forced.message
    doc = world.cc.docs[("order", "bootstrap")][-1]
    assert doc["note"] == "kept"
    assert doc["dragonfly"]["password"] == world.vault.current("infra/dragonfly", "password")


def test_an_edit_of_another_pointer_is_kept_by_the_rollback(
    world: World, tmp_path: Path
) -> None:
    """Another writer (a human, another credential's run) changed a pointer dragonfly does
    not own: the rollback restores dragonfly's pointers onto that document, no --force."""
    world.cc.docs[("order", "bootstrap")][-1]["postgres"] = {"password": "p" * 40}
    report = run(world, tmp_path)
    last = world.cc.docs[("order", "bootstrap")][-1]
    world.cc.docs[("order", "bootstrap")].append(
        {**last, "postgres": {"password": "q" * 40}, "note": "another writer"})
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    doc = world.cc.docs[("order", "bootstrap")][-1]
    assert doc["postgres"] == {"password": "q" * 40} and doc["note"] == "another writer"
    old = world.vault.current("infra/dragonfly", "password")
    assert doc["dragonfly"]["password"] == old and old in doc["dragonfly"]["url"]


def test_an_edit_made_while_the_rollback_runs_is_not_overwritten(
    world: World, tmp_path: Path
) -> None:
    """The restore compares the owned pointers with what the run wrote when it writes, not
    only in the guard: an edit of one slipping in after the guard fails the step, kept."""
    report = run(world, tmp_path)
    original = world.vault.write
    edited: list[dict[str, object]] = []

    def write(*a: object, **kw: object) -> int:
        edited.append(_owned_edit(world))  # during the backend restore
        world.vault.write = original  # type: ignore[method-assign]
        return original(*a, **kw)  # type: ignore[arg-type]

    world.vault.write = write  # type: ignore[method-assign]
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.exit_code == 13, rb.message
    assert "/dragonfly/password" in rb.message
    assert world.cc.docs[("order", "bootstrap")][-1] == edited[0]


# ---------------------------------------------------------------- resume keeps a supplied value


def test_resume_of_a_stdin_run_needs_the_same_value_again(world: World, tmp_path: Path) -> None:
    from rotate.core.errors import TemporaryError, UsageError
    from rotate.core.secret import Secret

    value = Secret("supplied-by-the-operator-0123456789abcdef")
    world.vault.faults.arm("write", TemporaryError("vault", "write", "unavailable"), times=-1)
    failed = world.engine().run(options(tmp_path, timeout=0.4), "dragonfly",
                                RecordingObserver(), CancelToken(), new_value=value)
    assert failed.exit_code == 10
    journal = (tmp_path / "state" / "runs" / failed.run_id / "journal.jsonl").read_text()
    assert value.reveal() not in journal and '"value_fingerprint"' in journal
    world.vault.faults.clear()
    with pytest.raises(UsageError) as exc:
        resume(world, tmp_path, failed.run_id)
    assert "--value-stdin" in (exc.value.hint or "") and exc.value.exit_code == 2
    with pytest.raises(UsageError) as exc:
        world.engine().resume(options(tmp_path), failed.run_id, RecordingObserver(),
                              CancelToken(), new_value=Secret("another-value-0123456789abcdefgh"))
    assert "fingerprint mismatch" in exc.value.message
    assert len(world.vault.versions["infra/dragonfly"]) == 2
    done = world.engine().resume(options(tmp_path), failed.run_id, RecordingObserver(),
                                 CancelToken(), new_value=value)
    assert done.status == "succeeded", done.message
    assert world.vault.current("infra/dragonfly", "password") == value.reveal()


# ---------------------------------------------------------------- tokens: one live per consumer


def _live(world: World, svc: str) -> list[str]:
    return [t.id for t in world.cc.list_tokens(svc) if not t.revoked]


def test_a_token_minted_but_never_journaled_is_revoked(world: World, tmp_path: Path) -> None:
    """kill -9 between minting and journaling the id: the token carries the run id."""
    from rotate.core.errors import TemporaryError

    world.cc.faults.arm("mint_token_applied", TemporaryError("config center", "mint", "lost"))
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    for svc in ("cart", "order", "user"):
        live = _live(world, svc)
        assert len(live) == 1, (svc, world.cc.tokens[svc])
        assert world.cc.list_tokens(svc)[-1].label == report.run_id


def test_rollback_revokes_the_tokens_the_run_minted(world: World, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    minted = {svc: _live(world, svc) for svc in ("cart", "order", "user")}
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    assert [s.kind for s in rb.steps][-4:] == [*["token.revoke"] * 3, "backend.confirm"]
    for svc in ("cart", "order", "user"):
        live = _live(world, svc)
        assert len(live) == 1 and live != minted[svc], svc


def test_config_center_refusing_writes_fails_preflight(world: World, tmp_path: Path) -> None:
    from rotate.core.errors import TemporaryError

    world.cc.faults.arm("probe_write", TemporaryError("config center", "write probe",
                                                      "unavailable", status=503), times=-1)
    with pytest.raises(PreflightFailed) as exc:
        run(world, tmp_path)
    assert exc.value.exit_code == 3 and "configcenter.writable" in exc.value.message
    assert world.vault.writes == 0 and world.kube.patches == []
