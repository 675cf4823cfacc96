"""Failure paths on the lab: a failing readyz (exit 16) resumed then rolled back; a second
concurrent run (exit 4); a kill -9 in the middle of a run followed by resume from another
state directory (the journal is in the cluster); a provider
that crash-loops (exit 12, the prepared consumers undone) and the resume that prepares the
consumers before the provider switches, under steady load; a prepared consumer whose new pod
never starts (exit 15 before the switch, undone) and its resume, which switches only once
every new consumer pod has started.

One lab for the module; tests run in file order and each leaves the chain healthy.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from bench.load import Load
from bench.world import Target, parse_hosts
from rotate.core.timestamps import parse_rfc3339
from tests.support.labtools import CONSUMERS, SHOP, Lab, newest_run
from tests.support.polling import eventually, holds

pytestmark = pytest.mark.lab

#: every run here is the hard cut: these tests check the restart order (consumers prepared
#: before the provider switches, undone when the switch cannot come) and its failures; the
#: lab chain's default for dragonfly is overlap (an ACL user holds two values)
RESTART = ("--strategy", "restart")


def started_steps(lab: Lab, run_id: str) -> set[str]:
    return {e.get("kind", "") for e in lab.journal_events(run_id) if e.get("event") == "step.start"}


def resume_keeps_the_value(lab: Lab, run_id: str, version: int, value: str) -> None:
    """``rotate resume`` succeeds and never writes a second value."""
    res = lab.rotate("resume", run_id, "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == version, "resume must never write a second value"
    assert lab.bao_password() == value


def wait_at_sync_wait(lab: Lab, known: set[str]) -> str:
    """The id of the run just started (not in ``known``), once it waits on a stalled ESO."""
    run_id = eventually(lambda: newest_run(lab, known), 30, "the run's journal")
    eventually(lambda: "sync.wait" in started_steps(lab, run_id) or None, 30,
               "the run to reach sync.wait")
    return run_id


def _report_file(path: Path) -> dict[str, object]:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc["apiVersion"] == "rotate/v1" and doc["kind"] == "run"
    return doc  # type: ignore[no-any-return]


def events_of(lab: Lab, namespace: str, run_id: str, name: str) -> list[tuple[str, str]]:
    """(type, reason) of the run's events on object ``name`` in ``namespace``."""
    return [(e["type"], e["reason"])
            for e in lab.kjson("get", "events", "-n", namespace)["items"]
            if e.get("reportingInstance") == run_id and e["involvedObject"]["name"] == name]


def test_failing_readyz_exits_16_then_resume_then_rollback(lab: Lab, tmp_path: Path) -> None:
    v0 = lab.bao_version()
    old_password = lab.bao_password()
    lab.fault("readyz-fail", "cart")
    try:
        res = lab.rotate("dragonfly", "--confirm", *RESTART, "--timeout", "8s", "-o", "json",
                         "--report-file", str(tmp_path / "run.json"))
    finally:
        lab.fault("readyz-fail", None, clear=True)
    assert res.code == 16, res.output
    report = json.loads(res.stdout)
    assert _report_file(tmp_path / "run.json") == report  # the same document, even failed
    run_id = report["run_id"]
    assert report["status"] == "failed"
    assert report["resume"] == f"rotate resume {run_id} --confirm"
    assert report["rollback"] == f"rotate rollback {run_id} --confirm"
    assert f"rotate resume {run_id} --confirm" in res.stderr
    assert "readyz" in res.stderr and "cart" in res.stderr
    # The failure is where operators look: a Warning on cart, with the run and the next step.
    failed = events_of(lab, "shop", run_id, "cart")
    assert ("Warning", "RotationFailed") in failed and ("Warning", "StepFailed") in failed
    described = lab.kubectl("describe", "deployment", "cart", "-n", "shop")
    assert "RotationFailed" in described and f"rotate resume {run_id}" in described
    assert lab.bao_version() == v0 + 1
    new_password = lab.bao_password()

    resume_keeps_the_value(lab, run_id, v0 + 1, new_password)
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}

    res = lab.rotate("rollback", run_id, "--confirm", "--report-file",
                     str(tmp_path / "rollback.json"))
    assert res.code == 0, res.output
    rolled = _report_file(tmp_path / "rollback.json")
    assert (rolled["operation"], rolled["of_run"], rolled["exit_code"]) == ("rollback", run_id, 0)
    assert ("Normal", "RolledBack") in events_of(lab, "shop", str(rolled["run_id"]), "cart")
    assert "RolledBack" in lab.kubectl("describe", "deployment", "cart", "-n", "shop")
    assert old_password not in lab.kubectl("get", "events", "-A", "-o", "json")
    text = (tmp_path / "rollback.json").read_text() + (tmp_path / "run.json").read_text()
    assert old_password not in text and new_password not in text
    # Version N's data written back as a new version, through the whole chain.
    assert lab.bao_version() == v0 + 2
    assert lab.bao_password() == old_password
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == old_password
    assert lab.dragonfly_auth(old_password) and not lab.dragonfly_auth(new_password)
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == old_password
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
    runs = lab.rotate("runs", "-o", "json")
    assert runs.code == 0
    statuses = {r["run_id"]: r["status"] for r in json.loads(runs.stdout)["runs"]}
    assert statuses[run_id] == "rolled-back"


def test_second_concurrent_run_exits_4(lab: Lab) -> None:
    known = set(lab.run_ids())
    lab.fault("eso-stall")
    first = lab.spawn_rotate("dragonfly", "--confirm", *RESTART)
    try:
        run_id = wait_at_sync_wait(lab, known)
        second = lab.rotate("dragonfly", "--confirm", *RESTART)
        assert second.code == 4, second.output
        assert "rotate-dragonfly" in second.output and run_id in second.output
        # another credential rolling the same Dragonfly waits its turn too (issue 10 item 1)
        other = lab.rotate("dragonfly-acl", "--confirm")
        assert other.code == 4, other.output
        assert "rotate-provider-deployment-dragonfly-dragonfly" in other.output
        assert run_id in other.output
    finally:
        lab.fault("eso-stall", None, clear=True)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def _cluster_journal(lab: Lab, run_id: str) -> str | None:
    """The run's journal as the cluster holds it (its head ConfigMap), read with kubectl."""
    from rotate.clients.cluster_journals import head_name

    found = lab.kjson("get", "configmaps", "-n", "rotate-system",
                      "-l", "rotate.dev/journal=run")["items"]
    head = next((c for c in found if c["metadata"]["name"] == head_name(run_id)), None)
    return None if head is None else str(head["data"]["journal.jsonl"])


def test_kill_9_mid_run_then_resume_from_another_state_dir(lab: Lab, tmp_path: Path) -> None:
    """A run killed (kill -9) with state directory A is listed and resumed with state
    directory B, and a new run from B is refused while it is unfinished: its journal is in
    the cluster.  The resume writes no second value and finishes the chain."""
    known = set(lab.run_ids())
    v0 = lab.bao_version()
    revs = lab.revisions()
    lab.fault("eso-stall")
    proc = lab.spawn_rotate("dragonfly", "--confirm", *RESTART)
    try:
        run_id = wait_at_sync_wait(lab, known)
        local = Path(lab.env["ROTATE_STATE_DIR"]) / "runs" / run_id / "journal.jsonl"
        eventually(lambda: _cluster_journal(lab, run_id) == local.read_text() or None, 30,
                   "the cluster copy of the journal to catch up")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        lab.fault("eso-stall", None, clear=True)
    assert lab.bao_version() == v0 + 1
    written = lab.bao_password()
    b = ("--state-dir", str(tmp_path / "b"))
    listed = lab.rotate("runs", "-o", "json", *b)
    assert listed.code == 0, listed.output
    [row] = [r for r in json.loads(listed.stdout)["runs"] if r["run_id"] == run_id]
    assert row["status"] == "interrupted"
    held = lab.rotate("dragonfly", "--confirm", *b)
    assert held.code == 4 and run_id in held.output, held.output
    refused = lab.rotate("dragonfly", "--confirm", "--take-over-lock", *b)
    assert refused.code == 3, refused.output
    assert "runs.unfinished" in refused.output and run_id in refused.output
    assert lab.bao_version() == v0 + 1  # nothing changed by either

    resumed = lab.rotate("resume", run_id, "--confirm", *b)
    assert resumed.code == 0, resumed.output
    assert lab.bao_version() == v0 + 1, "resume must never write a second value"
    assert lab.bao_password() == written
    shown = lab.rotate("show", run_id, "-o", "json")  # A reads B's resume from the cluster
    assert json.loads(shown.stdout)["status"] == "succeeded", shown.output
    assert _cluster_journal(lab, run_id) == local.read_text()
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == written
    assert lab.dragonfly_auth(written)
    after = lab.revisions()
    for svc in CONSUMERS:
        assert after[svc] == revs[svc] + 1
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def test_sigint_exits_130_and_the_run_resumes(lab: Lab) -> None:
    known = set(lab.run_ids())
    v0 = lab.bao_version()
    lab.fault("eso-stall")
    proc = lab.spawn_rotate("dragonfly", "--confirm", *RESTART)
    try:
        run_id = wait_at_sync_wait(lab, known)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        lab.fault("eso-stall", None, clear=True)
    assert proc.returncode == 130, out + err
    assert f"rotate resume {run_id} --confirm" in err
    # The lock was released: a resume does not need --take-over-lock.
    res = lab.rotate("resume", run_id, "--confirm")
    assert res.code == 0, res.output
    assert lab.bao_version() == v0 + 1


# -- the restart strategy prepares the consumers before the provider switches ------------


def _consumer_load(lab: Lab) -> Load:
    """Steady /work load (20 req/s each) on cart, order and user, addressed by ClusterIP."""
    hosts = parse_hosts((lab.dir / "hosts").read_text())
    targets = []
    for name in CONSUMERS:
        fqdn = f"{name}.shop.svc.cluster.local"
        port = int(lab.kjson("get", "service", name, "-n", "shop")["spec"]["ports"][0]["port"])
        targets.append(Target(name, "shop", fqdn, hosts[fqdn], port))
    return Load(targets, rps=20, max_seconds=240).start()


def _pods(lab: Lab, app: str) -> list[dict[str, Any]]:
    items = lab.kjson("get", "pods", "-n", "shop", "-l", f"app={app}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _rolled_out(lab: Lab, app: str) -> bool:
    """The Deployment's status says what preflight checks: every replica updated and
    available for the current generation (pods Ready is not enough: the controller writes
    the status a moment later)."""
    d = lab.kjson("get", "deployment", "-n", "shop", app)
    spec, st = d.get("spec") or {}, d.get("status") or {}
    want = spec.get("replicas", 1)
    return (st.get("observedGeneration") == d["metadata"].get("generation")
            and st.get("updatedReplicas") == want and st.get("availableReplicas") == want
            and st.get("replicas") == want)


def _new_pods(lab: Lab, old: dict[str, set[str]]) -> dict[str, list[dict[str, Any]]]:
    """Per consumer, the pods that are not in ``old``."""
    return {svc: [p for p in _pods(lab, svc) if p["metadata"]["name"] not in old[svc]]
            for svc in CONSUMERS}


def _running_unready(pod: dict[str, Any]) -> bool:
    """Its process runs (never restarted) and its readiness fails."""
    states = (pod.get("status") or {}).get("containerStatuses") or []
    return (bool(states) and "running" in (states[0].get("state") or {})
            and states[0].get("restartCount", 0) == 0 and not _ready(pod))


def _waiting(lab: Lab, old: dict[str, set[str]]) -> bool:
    """Every consumer has a new pod, running but unready, and its old pods Ready."""
    for svc, pods in _new_pods(lab, old).items():
        if not pods or not all(_running_unready(p) for p in pods):
            return False
        if not all(_ready(p) for p in _pods(lab, svc) if p["metadata"]["name"] in old[svc]):
            return False
    return True


def _rollout_dragonfly_chain(lab: Lab) -> str:
    """The example chain with Dragonfly rolled (``apply: rollout``) instead of changed live:
    a provider whose rollout can fail, in the lab DIR with the schemas it names beside it."""
    original = Path(lab.env["ROTATE_CHAIN"])
    text = original.read_text()
    live = "        apply: redis-acl\n        user: default\n"
    assert live in text
    folder = lab.dir / "rollout-dragonfly"
    folder.mkdir(exist_ok=True)
    if not (folder / "schemas").exists():
        (folder / "schemas").symlink_to(original.parent / "schemas")
    copy = folder / "rotate.yaml"
    copy.write_text(text.replace(live, "", 1))
    return str(copy)


def _settled(lab: Lab) -> tuple[dict[str, set[str]], dict[str, int]]:
    """Once the previous test's rollouts settled: each consumer's pods and document version."""
    eventually(lambda: all(len(_pods(lab, svc)) == 1 and all(map(_ready, _pods(lab, svc)))
                           and _rolled_out(lab, svc) for svc in CONSUMERS), 60,
               "the previous test's rollouts settled")
    old_pods = {svc: {p["metadata"]["name"] for p in _pods(lab, svc)} for svc in CONSUMERS}
    return old_pods, {svc: lab.bootstrap(svc)["version"] for svc in CONSUMERS}


def _assert_prepared_undone(lab: Lab, report: dict[str, Any], old_pods: dict[str, set[str]],
                            docs: dict[str, int], old_password: str, readers: int = 0) -> None:
    """The run undid what it prepared: each document written, then restored as a new
    version holding the old password; each consumer back on its old pods, Ready again."""
    assert "no consumer uses the new value" in report["message"]
    undo = [s["kind"] for s in report["steps"] if s["kind"].endswith(".undo")]
    # the Secret readers restarted once their Secrets were proven too (workload.undo)
    assert undo == ["config.undo"] * 3 + ["consumer.undo"] * 3 + ["workload.undo"] * readers
    for svc in CONSUMERS:
        doc = lab.bootstrap(svc)
        assert doc["version"] == docs[svc] + 2
        assert doc["value"]["dragonfly"]["password"] == old_password
        assert {p["metadata"]["name"] for p in _pods(lab, svc)} == old_pods[svc]  # settled
    # (a probe may miss on a loaded machine: Ready again within a few periods)
    eventually(lambda: all(_ready(p) for svc in CONSUMERS for p in _pods(lab, svc)),
               30, "the old consumer pods Ready")


def test_provider_failure_undoes_the_prepared_consumers_then_resume_prepares_first(
        lab: Lab) -> None:
    """``provider-crashloop``: the run exits 12 having put documents and rollouts back, with
    no failed request; its resume starts the new consumer pods — running, unready, the old
    pods serving — *before* the provider switches, then completes once the provider does."""
    old_pods, docs = _settled(lab)
    chain = _rollout_dragonfly_chain(lab)
    old_password = lab.bao_password()
    load = _consumer_load(lab)
    try:
        lab.fault("provider-crashloop")
        try:
            res = lab.rotate("dragonfly", "--confirm", *RESTART, "--timeout", "8s", "-o", "json",
                             "--chain", chain)
            assert res.code == 12, res.output
            report = json.loads(res.stdout)
            run_id = report["run_id"]
            # the reports namespace's two Secret readers restarted before the switch
            _assert_prepared_undone(lab, report, old_pods, docs, old_password, readers=2)
            assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
            assert [s for s in load.samples if not s.ok] == []

            # resumed with the provider still failing: the consumers are prepared first
            resumed = lab.spawn_rotate("resume", run_id, "--confirm", "--chain", chain)
            eventually(lambda: _waiting(lab, old_pods), 60,
                       "new consumer pods running unready beside the old Ready ones")
            # the sample service keeps running while Dragonfly refuses its password
            holds(lambda: _waiting(lab, old_pods), 2.0,
                  "the new pods stay running and unready while the provider is old")
            assert [s for s in load.samples if not s.ok] == []  # the old pods still serve
        finally:
            lab.fault("provider-crashloop", None, clear=True)
        out, err = resumed.communicate(timeout=180)
    finally:
        samples = load.stop()
    assert resumed.returncode == 0, out + err
    new_password = lab.bao_password()
    assert new_password != old_password and lab.dragonfly_auth(new_password)
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == new_password
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
    failed = [s for s in samples if not s.ok]
    # only the catch-up after the switch can fail: a readiness period, never a pod start
    # (cart/order/user at 20 req/s: the old order failed ~100 per consumer in the bench)
    assert len(failed) < len(CONSUMERS) * 60, len(failed)


def _step_times(lab: Lab, run_id: str, event: str, kind: str) -> list[str]:
    return [e["ts"] for e in lab.journal_events(run_id)
            if e.get("event") == event and e.get("kind") == kind]


def test_a_prepared_pod_that_never_starts_fails_before_the_switch_then_resume(
        lab: Lab) -> None:
    """The switch waits until the prepared consumers' new pods have started (chain.md
    "Order"): ``crashloop order`` makes order's new pod never start, so consumer.restart
    fails (exit 15) before provider.apply, Dragonfly still takes the old password, and the
    run puts documents and rollouts back.  Resumed once order is fixed, provider.apply
    starts only after every consumer's new pod reported started; and the run, resumed after
    its undo, rolls back like any other."""
    eventually(lambda: all(len(_pods(lab, svc)) == 1 and all(map(_ready, _pods(lab, svc)))
                           for svc in CONSUMERS), 60, "the previous test's rollouts settled")
    old_password = lab.bao_password()
    old_pods = {svc: {p["metadata"]["name"] for p in _pods(lab, svc)} for svc in CONSUMERS}
    lab.fault("crashloop", "order")
    try:
        res = lab.rotate("dragonfly", "--confirm", *RESTART, "--timeout", "8s", "-o", "json")
    finally:
        lab.fault("crashloop", "order", clear=True)
    assert res.code == 15, res.output
    report = json.loads(res.stdout)
    run_id = report["run_id"]
    assert "consumer.restart on deployment/shop/order failed" in report["message"]
    assert "new pods of deployment/shop/order to start" in report["message"]
    # Dragonfly is changed in place (apply: redis-acl), and was not yet
    assert ("deployment/dragonfly/dragonfly not changed yet (takes the old value)"
            in report["message"])
    assert not {k for k in started_steps(lab, run_id) if k.startswith("provider.")}
    assert lab.dragonfly_auth(old_password)  # nothing switched
    undo = [s["kind"] for s in report["steps"] if s["kind"].endswith(".undo")]
    # the Secret readers had not restarted yet: they come after sync.wait
    assert undo == ["config.undo"] * 3 + ["consumer.undo"] * 3
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == old_password
        assert {p["metadata"]["name"] for p in _pods(lab, svc)} == old_pods[svc]

    # the chain is half-rotated (the backend and the Secret hold the new value): a second
    # rotation refuses to start on top of it, changing nothing
    version = lab.bao_version()
    second = lab.rotate("dragonfly", "--confirm", *RESTART)
    assert second.code == 3, second.output
    assert "runs.unfinished" in second.output and f"rotate resume {run_id}" in second.output
    assert lab.bao_version() == version

    resumed = lab.rotate("resume", run_id, "--confirm")
    assert resumed.code == 0, resumed.output
    assert lab.dragonfly_auth(lab.bao_password()) and not lab.dragonfly_auth(old_password)
    [switch] = _step_times(lab, run_id, "step.start", "provider.apply")
    # the journal: every prepared restart was proven (its new pods started) before the switch
    restarts = [e for e in lab.journal_events(run_id) if e.get("event") == "step.done"
                and e.get("kind") == "consumer.restart"][-3:]  # the resume's
    assert all(e["ts"] < switch for e in restarts)
    assert all("new pod(s) started" in e["data"]["detail"] for e in restarts)
    # the world agrees: each consumer's serving pod is a new one whose process ran before
    # the switch (the kubelet's startedAt, to the second)
    for svc in CONSUMERS:
        [pod] = _pods(lab, svc)
        assert pod["metadata"]["name"] not in old_pods[svc]
        [state] = pod["status"]["containerStatuses"]
        assert state["restartCount"] == 0
        assert parse_rfc3339(state["state"]["running"]["startedAt"]) <= parse_rfc3339(switch)
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}

    # the run wrote each document three times (new value, undo, new value again): its
    # rollback takes the last as its own, nothing moved since — no refusal, no --force
    rolled = lab.rotate("rollback", run_id, "--confirm")
    assert rolled.code == 0, rolled.output
    assert lab.dragonfly_auth(old_password)
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == old_password
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def test_a_sync_that_never_comes_undoes_the_consumers_prepared_beside_it(lab: Lab) -> None:
    """The consumers are prepared while ESO reacts (chain.md "Order"); with ESO stalled the
    run fails at sync.wait (exit 11) and puts documents and rollouts back, with no failed
    request and Dragonfly untouched.  Resumed once ESO answers, it triggers ESO again,
    prepares again and completes."""
    old_pods, docs = _settled(lab)
    old_password = lab.bao_password()
    load = _consumer_load(lab)
    try:
        lab.fault("eso-stall")
        try:
            res = lab.rotate("dragonfly", "--confirm", *RESTART, "--timeout", "8s", "-o", "json")
        finally:
            lab.fault("eso-stall", None, clear=True)
        assert res.code == 11, res.output
        report = json.loads(res.stdout)
        run_id = report["run_id"]
        assert [s["kind"] for s in report["steps"] if s["status"] == "failed"] == ["sync.wait"]
        assert not {k for k in started_steps(lab, run_id) if k.startswith("provider.")}
        assert lab.dragonfly_auth(old_password)
        _assert_prepared_undone(lab, report, old_pods, docs, old_password)
        assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
    finally:
        samples = load.stop()
    assert [s for s in samples if not s.ok] == []

    resumed = lab.rotate("resume", run_id, "--confirm")
    assert resumed.code == 0, resumed.output
    new_password = lab.bao_password()
    assert lab.dragonfly_auth(new_password) and not lab.dragonfly_auth(old_password)
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == new_password
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == new_password
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}


def live_tokens(lab: Lab, svc: str) -> list[dict[str, object]]:
    """The consumer's unrevoked Config Center tokens, from outside the tool."""
    listed = lab.cc("GET", f"/v1/services/{svc}/tokens").json()
    return [t for t in listed if not t["revoked"]]


def test_config_center_refusing_writes_stops_the_run_in_preflight(lab: Lab) -> None:
    """Issue 10 item 7: the write permission is proven before anything changes."""
    known, v0 = set(lab.run_ids()), lab.bao_version()
    docs = {svc: lab.bootstrap(svc)["version"] for svc in CONSUMERS}
    lab.fault("config-center-5xx")
    try:
        res = lab.rotate("dragonfly", "--confirm", *RESTART, "--timeout", "8s")
    finally:
        lab.fault("config-center-5xx", None, clear=True)
    assert res.code == 3, res.output
    assert "configcenter.writable" in res.output
    assert lab.bao_version() == v0 and set(lab.run_ids()) == known
    assert {svc: lab.bootstrap(svc)["version"] for svc in CONSUMERS} == docs


def test_rollback_refuses_to_overwrite_a_later_edit_then_force(lab: Lab) -> None:
    """Issue 10 items 2 and 3: a Config Center edit of a pointer the credential owns made after
    the run stops its rollback (exit 3, nothing changed), and --force restores only the owned
    pointers; every consumer holds exactly one live token, tagged with the
    run that minted it, after the run and after the rollback."""
    import httpx

    old = lab.bao_password()
    res = lab.rotate("dragonfly", "--confirm", *RESTART, "-o", "json")
    assert res.code == 0, res.output
    run_id = json.loads(res.stdout)["run_id"]
    for svc in CONSUMERS:
        live = live_tokens(lab, svc)
        assert [t.get("label") for t in live] == [run_id], (svc, live)
    doc = lab.bootstrap("order")  # a human edits a pointer dragonfly owns, and the host
    section = doc["value"]["dragonfly"]
    edited = {**doc["value"], "dragonfly": {**section, "password": "h" * 40,
                                            "host": section["host"].capitalize()}}
    put = httpx.put(f"{lab.env['CONFIG_CENTER_URL']}/v1/services/order/keys/bootstrap",
                    json={"value": edited}, timeout=10,
                    headers={"Authorization": f"Bearer {lab.env['CONFIG_CENTER_TOKEN']}",
                             "If-Match": f'"{doc["version"]}"'})
    assert put.status_code == 200, put.text
    version = lab.bao_version()

    refused = lab.rotate("rollback", run_id, "--confirm")
    assert refused.code == 3, refused.output
    assert "order/bootstrap" in refused.output and "--force" in refused.output
    assert lab.bao_version() == version
    assert lab.bootstrap("order")["version"] == doc["version"] + 1

    forced = lab.rotate("rollback", run_id, "--confirm", "--force")
    assert forced.code == 0, forced.output
    assert lab.bao_password() == old and lab.dragonfly_auth(old)
    after = lab.bootstrap("order")["value"]["dragonfly"]
    assert after["password"] == old  # the owned pointer restored over the edit
    assert after["host"] == section["host"].capitalize()  # not owned: the edit is kept
    for svc in CONSUMERS:
        assert len(live_tokens(lab, svc)) == 1, svc


RELOAD = "secret.reloader.stakater.com/reload"


def test_a_human_rollout_restart_is_not_taken_for_reloaders(lab: Lab) -> None:
    """Issue 10 item 1: Dragonfly annotated for Reloader, no Reloader running, and a human
    `kubectl rollout restart` of Dragonfly after the run noted its baseline but before the
    Secret changed.  The run took that roll for Reloader's, never rolled, and left Dragonfly
    on the old password (exit 15).  Now: no Reloader runs, so no wait and rotate rolls."""
    known = set(lab.run_ids())
    lab.kubectl("annotate", "deployment/dragonfly", "-n", "dragonfly",
                f"{RELOAD}=dragonfly-password-secret", "--overwrite")
    lab.fault("eso-stall")
    try:
        proc = lab.spawn_rotate("dragonfly", "--confirm", *RESTART, "--chain",
                                _rollout_dragonfly_chain(lab))
        run_id = wait_at_sync_wait(lab, known)
        lab.kubectl("rollout", "restart", "deployment/dragonfly", "-n", "dragonfly")
        lab.kubectl("rollout", "status", "deployment/dragonfly", "-n", "dragonfly",
                    "--timeout=60s")
    finally:
        lab.fault("eso-stall", None, clear=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        lab.kubectl("annotate", "deployment/dragonfly", "-n", "dragonfly", f"{RELOAD}-")
    assert proc.returncode == 0, out + err
    done = [e for e in lab.journal_events(run_id)
            if e.get("event") == "step.done" and e.get("kind") == "provider.restart"]
    assert done and str(done[0]["data"].get("detail", "")).startswith("restartedAt="), done
    written = lab.bao_password()
    assert lab.dragonfly_auth(written)
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
