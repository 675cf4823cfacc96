"""The restart strategy prepares the consumers before the provider switches (chain.md "Order").

On the fakes: the plan's order, a consumer whose rollout cannot surge kept after the switch,
the undo of the prepared steps when the provider then fails (documents restored If-Match
the version written, pod templates back as they were, journaled as steps), and a kill at
every new step boundary followed by resume: the undo is finished, then a resume after the
provider is repaired prepares again and succeeds with one value written.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from rotate.core.errors import TemporaryError
from rotate.core.waiting import CancelToken
from rotate.engine import journal as journal_mod
from rotate.engine.model import PlannedStep, RunReport, StepRecord
from rotate.stages.rollout import RESTARTED_AT, RUN_ID_ANNOTATION
from tests.fakes import CONSUMERS, World
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    options,
    resume,
    rollback,
    run,
)

OLD = "old-password-0123456789abcdefghijklmn"
PREPARED = ["config.harvest", *["config.write"] * 3, *["consumer.restart"] * 3]


class Killed(BaseException):
    """The process dies at a step boundary: nothing below catches a BaseException."""


def kinds(report: RunReport) -> list[str]:
    return [s.kind for s in report.steps if s.kind != "preflight"]


def test_consumers_are_prepared_before_the_provider_switches(world: World,
                                                             tmp_path: Path) -> None:
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    steps = [s.kind for s in plan.steps]
    # everything the consumers need is prepared while ESO reacts, before sync.wait's proof
    assert steps[:5] == ["backend.write", "sync.trigger", *["token.mint"] * 3]
    assert steps[5:12] == PREPARED
    assert steps[12] == "sync.wait"
    assert steps[13:15] == ["provider.restart", "provider.wait"]
    assert steps[15:18] == ["consumer.wait"] * 3
    restart = next(s for s in plan.steps if s.kind == "consumer.restart")
    assert "before the provider switches" in restart.detail
    report = run(world, tmp_path)
    assert report.exit_code == 0, report.message
    # the journal shows the order the world saw: every consumer rollout started first
    started = [r["kind"] for r in journal_lines(tmp_path, report.run_id)
               if r["event"] == "step.start"]
    assert started.index("provider.restart") > max(
        i for i, k in enumerate(started) if k == "consumer.restart")
    assert world.rollouts[-1] == "dragonfly/dragonfly"


def test_the_plan_text_says_which_steps_run_beside_the_sync(world: World,
                                                           tmp_path: Path) -> None:
    from rotate.cli.render_plan import plan_lines

    plan = world.engine().plan(options(tmp_path), "dragonfly")
    heads = [line.strip() for line in plan_lines(plan) if line.startswith("  ") and
             line.strip()[:1] in "①②③④"]
    assert heads == ["① backend", "② sync",
                     "④ consumers, prepared during ② sync, before ③ provider (new pods wait "
                     "unready for it)",
                     "② sync (beside the ④ consumers steps above)",
                     "③ provider", "④ consumers", "① backend"]


def test_a_consumer_whose_old_pods_go_first_is_rolled_after_the_switch(
        world: World, tmp_path: Path) -> None:
    world.kube.raw("Deployment", "shop", "order")["spec"]["strategy"] = {"type": "Recreate"}
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    restarts = [(s.subject, s.index, s.detail) for s in plan.steps
                if s.kind == "consumer.restart"]
    switch = next(s.index for s in plan.steps if s.kind == "provider.wait")
    assert [subject for subject, index, _ in restarts if index < switch] == ["cart", "user"]
    late = [(index, detail) for subject, index, detail in restarts if subject == "order"]
    assert late[0][0] > switch and "Recreate" in late[0][1]
    report = run(world, tmp_path)
    assert report.exit_code == 0, report.message
    assert all(world.running[n] == world.running["dragonfly"] for n in CONSUMERS)


def assert_prepared_undone(world: World, run_id: str) -> None:
    """Documents back on the old value, pod templates as before the run, old pods serving."""
    for name in CONSUMERS:
        versions = world.cc.docs[(name, "bootstrap")]
        assert versions[-1] == versions[0] and len(versions) == 3  # restored as a new version
        dep = world.kube.raw("Deployment", "shop", name)
        assert RESTARTED_AT not in dep["spec"]["template"]["metadata"]["annotations"]
        assert dep["metadata"]["annotations"][RUN_ID_ANNOTATION] == f"{run_id}.undone"
        assert world.running[name] == OLD
    assert world.running["dragonfly"] == OLD


def assert_rotated(world: World, tmp_path: Path, run_id: str) -> None:
    new = world.vault.current("infra/dragonfly", "password")
    assert world.vault.writes == 1  # never a second value
    assert world.running["dragonfly"] == new
    for name in CONSUMERS:
        assert world.cc.docs[(name, "bootstrap")][-1]["dragonfly"]["password"] == new
        assert world.running[name] == new
        assert len([t for t in world.cc.tokens[name] if not t["revoked"]]) == 1
    state = journal_mod.load(tmp_path / "state", run_id)
    assert state.status == "succeeded" and not state.undone


def test_a_provider_that_fails_undoes_the_prepared_consumers(world: World,
                                                             tmp_path: Path) -> None:
    world.stuck.add("dragonfly")
    report = run(world, tmp_path, timeout=0.4)
    assert (report.status, report.exit_code) == ("failed", 12)
    assert [s.kind for s in report.steps if s.status == "failed"] == ["provider.wait"]
    undo = [(s.kind, s.status) for s in report.steps if s.kind.endswith(".undo")]
    assert undo == [("config.undo", "done")] * 3 + [("consumer.undo", "done")] * 3
    assert_prepared_undone(world, report.run_id)
    undone = [s for s in report.steps if s.kind in ("config.write", "consumer.restart")]
    assert all(s.status == "pending" and s.detail.startswith("undone by step")
               for s in undone)
    msg = report.message
    assert "rollouts of cart, order, user settled back on their old pods" in msg
    assert "documents of cart, order, user restored" in msg
    assert "no consumer uses the new value" in msg
    assert f"rotate resume {report.run_id} --confirm" in msg

    world.kick("dragonfly", "dragonfly")
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert_rotated(world, tmp_path, report.run_id)


def test_a_sync_that_never_comes_undoes_the_consumers_prepared_beside_it(
        world: World, tmp_path: Path) -> None:
    """The consumers are prepared while ESO reacts; a sync that never comes fails the run
    (exit 11) and what was prepared is undone — documents restored, pod templates back, the
    old pods serving — while every consumer keeps two valid tokens (the old one its pods
    use, the new one in its Secret).  The resume triggers ESO again, prepares again, and
    finishes with the one value written."""
    world.eso_mode = "stall"
    report = run(world, tmp_path, timeout=0.4)
    assert (report.status, report.exit_code) == ("failed", 11), report.message
    assert [s.kind for s in report.steps if s.status == "failed"] == ["sync.wait"]
    undo = [(s.kind, s.status) for s in report.steps if s.kind.endswith(".undo")]
    assert undo == [("config.undo", "done")] * 3 + [("consumer.undo", "done")] * 3
    assert_prepared_undone(world, report.run_id)
    for name in CONSUMERS:
        assert len([t for t in world.cc.tokens[name] if not t["revoked"]]) == 2
    assert "dragonfly/dragonfly" not in world.rollouts
    assert "no consumer uses the new value" in report.message
    assert ("new machine tokens delivered for cart, order, user (the old ones stay valid "
            "until the run's last step)") in report.message
    assert f"rotate resume {report.run_id} --confirm" in report.message

    world.eso_mode = "ok"
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    triggers = [r for r in journal_lines(tmp_path, report.run_id)
                if r["event"] == "step.start" and r["kind"] == "sync.trigger"]
    assert len(triggers) == 2
    assert_rotated(world, tmp_path, report.run_id)


def test_the_documents_hold_the_value_written_before_the_secret_does(
        world: World, tmp_path: Path) -> None:
    """The harvest runs while the Secret still holds the old value: each document carries
    the value backend.write put in the backend (sync.wait then proves the Secret holds that
    same value before the provider switches)."""
    world.eso_mode = "stall"
    seen: dict[str, str] = {}

    def written(step: PlannedStep, record: StepRecord) -> None:
        secret = world.kube.read_secret_key("dragonfly", "dragonfly-password-secret",
                                            "password")
        seen[step.subject] = secret.reveal() if secret is not None else ""
    obs = RecordingObserver()
    obs.on_finish["config.write"] = written
    report = run(world, tmp_path, obs, timeout=0.4)
    assert report.exit_code == 11, report.message
    new = world.vault.current("infra/dragonfly", "password")
    for name in CONSUMERS:
        assert seen[name] == OLD  # what the Secret held when the document was written
        assert world.cc.docs[(name, "bootstrap")][1]["dragonfly"]["password"] == new


@pytest.mark.parametrize("kind", ["token.mint", "config.harvest", "config.write",
                                  "consumer.restart"])
def test_the_prepared_steps_run_beside_the_sync_wait(world: World, tmp_path: Path,
                                                     kind: str) -> None:
    """The first step of ``kind`` is held at its start until sync.wait has started: one
    after the other, every prepared step would have to finish first (they are planned
    before it) and the hold would run out."""
    obs = RecordingObserver()
    waiting, released = threading.Event(), []
    obs.on_start["sync.wait"] = lambda step: waiting.set()

    def hold(step: PlannedStep) -> None:
        if not released:
            released.append(waiting.wait(timeout=5.0))
    obs.on_start[kind] = hold
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert released == [True]


def test_a_failed_mint_and_a_missed_sync_resume_with_a_fresh_trigger(world: World,
                                                                     tmp_path: Path) -> None:
    """ESO stalls while the Config Center refuses to mint: the run fails at the lowest step
    (a mint, exit 14), the sync wait failed beside it.  The resume mints, triggers ESO again
    right before the wait (the wait is not the first step left), and succeeds."""
    world.eso_mode = "stall"
    world.cc.faults.arm("mint_token", TemporaryError("config center", "mint", "unavailable"),
                        times=-1)
    report = run(world, tmp_path, timeout=0.4)
    assert (report.status, report.exit_code) == ("failed", 14), report.message
    failed = {s.kind for s in report.steps if s.status == "failed"}
    assert failed == {"token.mint", "sync.wait"}
    world.eso_mode = "ok"
    world.cc.faults.clear()
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    triggers = [r for r in journal_lines(tmp_path, report.run_id)
                if r["event"] == "step.start" and r["kind"] == "sync.trigger"]
    assert len(triggers) == 2
    assert_rotated(world, tmp_path, report.run_id)


BOUNDARIES = ["config.write", "token.mint", "consumer.restart", "provider.restart",
              "provider.wait", "consumer.undo", "config.undo"]


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_kill_at_each_new_boundary_resumes(world: World, tmp_path: Path,
                                             boundary: str) -> None:
    world.stuck.add("dragonfly")
    obs = RecordingObserver()
    killed: list[str] = []

    def die(step: PlannedStep) -> Any:
        if not killed:
            killed.append(step.kind)
            raise Killed
    obs.on_start[boundary] = die
    with pytest.raises(Killed):
        run(world, tmp_path, obs, timeout=0.4)
    run_id = journal_mod.list_run_ids(tmp_path / "state")[0]
    # the provider still fails: the resume ends as the run would have, undo complete
    again = world.engine().resume(options(tmp_path, timeout=0.4), run_id, RecordingObserver(),
                                  CancelToken())
    assert (again.status, again.exit_code) == ("failed", 12), again.message
    assert_prepared_undone(world, run_id)
    assert "no consumer uses the new value" in again.message

    world.kick("dragonfly", "dragonfly")
    resumed = resume(world, tmp_path, run_id)
    assert resumed.status == "succeeded", resumed.message
    assert_rotated(world, tmp_path, run_id)


@pytest.mark.parametrize(("kind", "spec", "early", "says"), [
    ("Deployment", {"replicas": 1}, True, ""),  # 25 %/25 % of 1: surge 1, unavailable 0
    ("Deployment", {"replicas": 4}, True, "3 of 4 old pod(s) serve"),
    ("Deployment", {"replicas": 1, "strategy": {"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": 0, "maxUnavailable": 1}}}, False, "leaves no old pod serving"),
    ("Deployment", {"replicas": 2, "strategy": {"type": "Recreate"}}, False, "Recreate"),
    ("StatefulSet", {"replicas": 3}, False, "StatefulSet (RollingUpdate)"),
    ("DaemonSet", {"updateStrategy": {"type": "OnDelete"}}, False, "DaemonSet (OnDelete)"),
])
def test_only_a_rollout_that_keeps_old_pods_serving_is_prepared(
        kind: str, spec: dict[str, Any], early: bool, says: str) -> None:
    from rotate.stages.surge import verdict

    got = verdict({"kind": kind, "spec": spec})
    assert got.early is early
    assert says in got.note


def test_the_switch_waits_for_the_prepared_pods_and_one_that_never_starts_fails_first(
        world: World, tmp_path: Path) -> None:
    """A prepared consumer.restart is proven only when its new pods have started: one that
    never starts fails the step (exit 15) before any provider step, and the run undoes every
    prepared consumer — the failed one too (its template was patched)."""
    world.unstarted.add("order")
    report = run(world, tmp_path, timeout=0.5)
    assert (report.status, report.exit_code) == ("failed", 15), report.message
    assert report.message.startswith(
        "Step 11 consumer.restart on deployment/shop/order failed: wait: new pods of "
        "deployment/shop/order to start: timed out")
    order = next(s for s in report.steps if s.index == 11)
    assert order.status == "pending" and order.detail.startswith("undone by step")
    started = [r["kind"] for r in journal_lines(tmp_path, report.run_id)
               if r["event"] == "step.start"]
    assert not [k for k in started if k.startswith("provider.")]
    assert "dragonfly/dragonfly" not in world.rollouts
    undo = [(s.kind, s.status) for s in report.steps if s.kind.endswith(".undo")]
    assert undo == [("config.undo", "done")] * 3 + [("consumer.undo", "done")] * 3
    assert_prepared_undone(world, report.run_id)
    assert "no consumer uses the new value" in report.message

    world.unstarted.discard("order")  # the template is fixed: resume prepares again
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert_rotated(world, tmp_path, report.run_id)


def test_a_run_resumed_after_its_undo_rolls_back_without_force(world: World,
                                                              tmp_path: Path) -> None:
    """Each document was written three times by the same run — the new value (v2), the
    undo's restore (v3), the resume's new value again (v4) — and the journal lists the
    ``config.write`` steps before the ``config.undo`` ones.  The rollback must take v4, the
    last write *in time*, as the run's own, and not refuse as if someone had edited the
    documents since the run."""
    world.unstarted.add("order")
    report = run(world, tmp_path, timeout=0.5)
    assert report.exit_code == 15, report.message
    world.unstarted.discard("order")
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert [len(world.cc.docs[(n, "bootstrap")]) for n in CONSUMERS] == [4, 4, 4]

    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    for name in CONSUMERS:
        docs = world.cc.docs[(name, "bootstrap")]
        assert len(docs) == 5 and docs[-1] == docs[0]  # the value before the run, as v5
        assert world.running[name] == OLD
    assert world.running["dragonfly"] == OLD


def test_the_plan_says_what_started_means_without_a_startup_probe(world: World,
                                                                  tmp_path: Path) -> None:
    template = world.kube.raw("Deployment", "shop", "cart")["spec"]["template"]["spec"]
    template["containers"][0]["startupProbe"] = {"httpGet": {"path": "/healthz",
                                                             "port": 8080}}
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    detail = {s.subject: s.detail for s in plan.steps if s.kind == "consumer.restart"}
    assert all("waits until the new pods have started" in d for d in detail.values())
    assert "no startupProbe" not in detail["cart"]
    assert "no startupProbe: \"started\" only means the container runs" in detail["order"]


def test_a_consumer_restart_reads_its_workload_once_before_its_patch(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # observe's read serves the record of the previous stamp and the restart's own check:
    # at 100 consumers two reads fewer each, 200 requests to a saturated API server.
    import threading
    mine = threading.local()
    seen: list[str] = []
    get, patch = world.kube.get, world.kube.patch

    def counting_get(kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        if getattr(mine, "on", False) and (kind, name) == ("Deployment", "cart"):
            seen.append("get")
        return get(kind, namespace, name)

    def counting_patch(kind: str, namespace: str | None, name: str, body: Any,
                       **kw: Any) -> dict[str, Any]:
        if getattr(mine, "on", False) and (kind, name) == ("Deployment", "cart"):
            seen.append("patch")
            mine.on = False
        return patch(kind, namespace, name, body, **kw)

    def starting(step: PlannedStep) -> None:
        mine.on = step.subject == "cart"
    monkeypatch.setattr(world.kube, "get", counting_get)
    monkeypatch.setattr(world.kube, "patch", counting_patch)
    obs = RecordingObserver()
    obs.on_start["consumer.restart"] = starting
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert seen == ["get", "patch"]
    assert_rotated(world, tmp_path, report.run_id)


def test_the_harvest_reads_a_source_the_consumers_share_once(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # cart, order and user all take /dragonfly/host and /dragonfly/port from the provider's
    # Service: one read builds the three documents (at 100 consumers, 99 requests fewer, one
    # snapshot).  Their /dragonfly/password is the value the run wrote to the backend: the
    # credential's Secret is not read at all (it may still hold the old value).
    reads: list[tuple[str, ...]] = []
    harvesting = [False]
    read, get = world.kube.read_secret_key, world.kube.get

    def counting_read(namespace: str, name: str, key: str) -> Any:
        if harvesting[0]:
            reads.append(("Secret", namespace, name, key))
        return read(namespace, name, key)

    def counting_get(kind: str, namespace: str | None, name: str) -> Any:
        if harvesting[0]:
            reads.append((kind, namespace or "", name))
        return get(kind, namespace, name)

    def switch(on: bool) -> Any:
        def flip(step: PlannedStep, *record: StepRecord) -> None:
            harvesting[0] = on
        return flip

    monkeypatch.setattr(world.kube, "read_secret_key", counting_read)
    monkeypatch.setattr(world.kube, "get", counting_get)
    obs = RecordingObserver()
    obs.on_start["config.harvest"] = switch(True)
    obs.on_finish["config.harvest"] = switch(False)
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert reads == [("Service", "dragonfly", "dragonfly")]
    assert_rotated(world, tmp_path, report.run_id)
