"""The whole chain against fakes: order, journal, proofs, secrecy, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes import World
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    options,
    resume,
    run,
)

#: restart strategy: the consumers are prepared (tokens, documents, new pods started) while
#: ESO reacts, before the provider switches; their rollouts complete after it (chain.md
#: "Order")
EXPECTED_KINDS = (
    ["preflight", "backend.write", "sync.trigger"] + ["token.mint"] * 3
    + ["config.harvest"] + ["config.write"] * 3 + ["consumer.restart"] * 3
    + ["sync.wait", "provider.restart", "provider.wait"]
    + ["consumer.wait"] * 3 + ["readyz.check"] * 3 + ["token.revoke"] * 3
    + ["backend.confirm"]
)


def test_plan_lists_steps_in_order_with_concrete_targets(world: World, tmp_path: Path) -> None:
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    assert plan.ok, [c for c in plan.preflight if not c.ok]
    assert ["preflight", *[s.kind for s in plan.steps]] == EXPECTED_KINDS
    assert plan.consumers == ("cart", "order", "user")
    targets = [s.target for s in plan.steps]
    assert targets[0] == "secret/infra/dragonfly#password"
    assert plan.steps[0].detail == "v2 → v3 (cas=2)"
    assert targets[1] == "dragonfly/dragonfly-password"
    assert "deployment/dragonfly/dragonfly" in targets
    assert "shop/cart bootstrap" in targets
    assert world.vault.writes == 0 and world.kube.patches == []  # plan changes nothing


def test_happy_path_rotates_every_link(world: World, tmp_path: Path) -> None:
    obs = RecordingObserver()
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert report.exit_code == 0
    assert [s.kind for s in report.steps] == EXPECTED_KINDS
    assert all(s.status == "done" for s in report.steps)
    assert report.backend == {"path": "secret/infra/dragonfly", "previous_version": 2,
                              "version": 3}
    new = world.vault.current("infra/dragonfly", "password")
    assert len(new) == 40 and world.vault.versions["infra/dragonfly"][-1]["username"] == "default"
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret", "password") == new
    for name in ("cart", "order", "user"):
        doc = world.cc.docs[(name, "bootstrap")][-1]
        assert doc["dragonfly"]["password"] == new
        assert doc["dragonfly"]["url"].startswith(f"redis://:{new}@")
        assert len(world.cc.docs[(name, "bootstrap")]) == 2
        live = [t for t in world.cc.tokens[name] if not t["revoked"]]
        assert len(live) == 1  # the pre-run token was revoked, the new one lives
        assert world.running[name] == new
    assert world.running["dragonfly"] == new
    assert len(world.cc.docs[("product", "bootstrap")]) == 1  # not a consumer: untouched
    # consumers restarted after their documents were written, before the provider rolled
    assert world.rollouts[-1] == "dragonfly/dragonfly"
    assert sorted(world.rollouts[:-1]) == ["shop/cart", "shop/order", "shop/user"]
    # every step: start journaled before done, observer saw the same
    lines = journal_lines(tmp_path, report.run_id)
    assert lines[0]["event"] == "run.start" and lines[-1]["event"] == "run.end"
    for step in report.steps:
        evs = [r["event"] for r in lines
               if r.get("index") == step.index and r["event"] != "step.progress"]
        assert evs == ["step.start", "step.done"], (step.kind, evs)
    text = (tmp_path / "state" / "runs" / report.run_id / "journal.jsonl").read_text()
    dumped = json.dumps(report.to_json())
    for secret in (new, "old-password-0123456789abcdefghijklmn"):
        assert secret not in text and secret not in dumped
    for toks in world.cc.tokens.values():
        for t in toks:
            assert t["token"] not in text and t["token"] not in dumped
    # restart trace: sub-second restartedAt + run id on the workload
    dep = world.kube.raw("Deployment", "dragonfly", "dragonfly")
    stamp = dep["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
    assert "." in stamp and stamp.endswith("Z")
    assert dep["metadata"]["annotations"]["rotate.dev/run-id"] == report.run_id
    # the lock is gone after the run
    assert ("Lease", "rotate-system", "rotate-dragonfly") not in world.kube.objects


def test_runs_and_show_read_the_journal(world: World, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    listed = world.engine().runs(options(tmp_path))
    assert [r.run_id for r in listed] == [report.run_id]
    assert listed[0].status == "succeeded"
    shown = world.engine().show(options(tmp_path), report.run_id)
    assert shown.to_json()["steps"] == report.to_json()["steps"]
    creds = world.engine().list_credentials(options(tmp_path))
    assert creds[0].consumers == ("cart", "order", "user")
    assert creds[0].last_run is not None and creds[0].last_run.run_id == report.run_id


def _annotate_provider(world: World) -> None:
    dep = world.kube.raw("Deployment", "dragonfly", "dragonfly")
    dep["metadata"]["annotations"]["secret.reloader.stakater.com/reload"] = (
        "dragonfly-password-secret")


def test_reloader_rolls_the_provider_and_rotate_does_not_roll_twice(
    world: World, tmp_path: Path
) -> None:
    from tests.fakes import FakeKube

    _annotate_provider(world)

    def reloader(kube: FakeKube, kind: str, ns: str, name: str) -> None:
        if (kind, ns, name) == ("Secret", "dragonfly", "dragonfly-password-secret"):
            record = json.dumps({"type": "SECRET", "name": "dragonfly-password-secret",
                                 "namespace": "dragonfly", "hash": "h"})
            kube.patch("Deployment", "dragonfly", "dragonfly", {"spec": {"template": {
                "metadata": {"annotations": {
                    "reloader.stakater.com/last-reloaded-from": record}}}}})
            world.pod_started_now("dragonfly", "dragonfly")

    world.reloader_runs()
    world.kube.controllers.append(reloader)
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    trap = next(t for t in plan.traps if t.name == "other-reloader")
    assert not trap.blocking and "roll only if it does not come" in trap.action
    detail = next(s.detail for s in plan.steps if s.kind == "provider.restart")
    assert "runs (deployment reloader/reloader (1 available)" in detail
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    step = next(s for s in report.steps if s.kind == "provider.restart")
    assert "not rolled again" in step.detail
    assert world.rollouts.count("dragonfly/dragonfly") == 1
    restarted = [p for p in world.kube.patches if p[:3] == ("Deployment", "dragonfly",
                                                            "dragonfly")
                 and "rotate.dev/run-id" in str(p[3])]
    assert restarted == []
    assert world.running["dragonfly"] == world.vault.current("infra/dragonfly", "password")


def test_reloader_that_never_comes_means_rotate_rolls(world: World, tmp_path: Path) -> None:
    _annotate_provider(world)
    world.reloader_runs()
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    step = next(s for s in report.steps if s.kind == "provider.restart")
    assert step.detail.startswith("restartedAt=")
    assert step.seconds is not None and step.seconds >= 0.3  # waited the grace first


def test_annotated_provider_without_a_running_reloader_is_rolled_at_once(
    world: World, tmp_path: Path
) -> None:
    """Issue 8 item 2: no Reloader Deployment, no wait (it used to sit reloaderGrace)."""
    _annotate_provider(world)
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    detail = next(s.detail for s in plan.steps if s.kind == "provider.restart")
    assert "no Reloader runs" in detail and "no wait" in detail
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    step = next(s for s in report.steps if s.kind == "provider.restart")
    assert step.detail.startswith("restartedAt=")
    assert step.seconds is not None and step.seconds < 0.3


def test_a_human_restart_before_the_secret_changes_is_not_taken_for_reloaders(
    world: World, tmp_path: Path
) -> None:
    """Issue 10 item 1: a `kubectl rollout restart` of the provider made as the run triggers
    ESO (before the Secret changes) bumped the generation; the run took it for Reloader's,
    did not roll, and Dragonfly kept the old password (exit 15)."""
    from tests.fakes import FakeKube

    _annotate_provider(world)
    world.reloader_runs()
    human = {"done": False}

    def kubectl_rollout_restart(kube: FakeKube, kind: str, ns: str, name: str) -> None:
        if kind == "ExternalSecret" and not human["done"]:
            human["done"] = True
            kube.patch("Deployment", "dragonfly", "dragonfly", {"spec": {"template": {
                "metadata": {"annotations": {
                    "kubectl.kubernetes.io/restartedAt": "2026-12-03T08:00:00Z"}}}}})

    world.kube.controllers.insert(0, kubectl_rollout_restart)
    report = run(world, tmp_path)
    assert human["done"]
    assert report.status == "succeeded", report.message
    step = next(s for s in report.steps if s.kind == "provider.restart")
    assert step.detail.startswith("restartedAt="), step.detail
    assert world.running["dragonfly"] == world.vault.current("infra/dragonfly", "password")


def test_credential_without_consumers_stops_after_the_provider(tmp_path: Path) -> None:
    from tests.fakes import make_chain

    w = World(make_chain(tmp_path, consumers=()))
    w.setup()
    try:
        report = run(w, tmp_path)
    finally:
        w.kube.close()
    assert report.status == "succeeded", report.message
    assert [s.kind for s in report.steps] == [
        "preflight", "backend.write", "sync.trigger", "sync.wait", "provider.restart",
        "provider.wait", "backend.confirm"]


def test_interrupt_during_parallel_consumer_waits(world: World, tmp_path: Path) -> None:
    from rotate.core.waiting import CancelToken

    cancel = CancelToken()
    obs = RecordingObserver()
    world.stuck |= {"cart", "order", "user"}
    obs.on_start["consumer.wait"] = lambda step: cancel.cancel("SIGTERM")
    report = run(world, tmp_path, obs, cancel, timeout=30)
    assert report.exit_code == 130 and report.status == "interrupted"
    waits = [s for s in report.steps if s.kind == "consumer.wait"]
    assert {s.status for s in waits} == {"pending"}
    for name in ("cart", "order", "user"):
        world.kick(name)
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message


def _vso_targets(world: World, kind: str, name: str, namespace: str) -> None:
    world.kube.put({"kind": "VaultStaticSecret",
                    "metadata": {"namespace": namespace, "name": "app-creds"},
                    "spec": {"rolloutRestartTargets": [{"kind": kind, "name": name}]}})


def test_vault_secrets_operator_on_the_provider_is_waited_for(
    world: World, tmp_path: Path
) -> None:
    _vso_targets(world, "Deployment", "dragonfly", "dragonfly")
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    assert plan.ok
    trap = next(t for t in plan.traps if t.target == "deployment/dragonfly/dragonfly")
    assert trap.name == "other-reloader" and not trap.blocking
    assert "Vault Secrets Operator (VaultStaticSecret dragonfly/app-creds" in trap.problem


def test_vault_secrets_operator_on_a_consumer_is_refused(world: World, tmp_path: Path) -> None:
    _vso_targets(world, "Deployment", "order", "shop")
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    assert not plan.ok
    trap = next(t for t in plan.traps if t.target == "deployment/shop/order")
    assert trap.blocking and "Vault Secrets Operator" in trap.problem
