"""``apply: job`` (rotate.providers.job) through the real Engine on the fake world: the
rotator Job runs per phase with the values only in a mounted Secret, a resumed run does not
run a succeeded phase again, the undo is the set phase with the old value, and every bad
case — a value in the template, a rotator that exits 1, hangs, or whose Job is deleted — is a
clear message, exit 3 or 12, and a journal from which resume and rollback both end
consistent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.chain.model import AdminAuth, JobTemplate, ProviderApply
from rotate.clients.seams import ReadyzTarget
from rotate.core.errors import PreflightFailed
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.waiting import CancelToken
from rotate.providers.job import VALUES_DIR, job_name, redact
from tests.fakes import CONSUMERS, World, assert_no_secret, make_chain
from tests.fakes.jobs import FakeApp, FakeJobs
from tests.support.engine import resume, rollback, run

OLD = "old-password-0123456789abcdefghijklmn"
PROVIDER = ObjectRef("Deployment", "dragonfly", "dragonfly")
TEMPLATE = JobTemplate(image="bugsink-rotator:1", command=("python", "-m", "rotator"),
                       env=(("APP_URL", "http://bugsink:8000"),), service_account="rotator",
                       deadline=30.0)


class JobWorld(World):
    jobs: FakeJobs

    def _readyz(self, target: ReadyzTarget) -> int:
        password = self.running.get(target.service)
        if password is not None and not self.jobs.app.accepts(password):
            return 503
        return 200


def _world(tmp_path: Path, template: JobTemplate = TEMPLATE) -> JobWorld:
    chain = make_chain(tmp_path)
    applied = ProviderApply(PROVIDER, "job", user=None, admin=AdminAuth(""), job=template)
    cred = dataclasses.replace(chain.credentials["dragonfly"], applies=(applied,))
    w = JobWorld(dataclasses.replace(chain, credentials={"dragonfly": cred}))
    w.jobs = FakeJobs(FakeApp(OLD))
    w.kube.controllers.append(w.jobs)
    w.setup(OLD)
    w.kube.put({"kind": "ServiceAccount", "metadata": {"name": "rotator",
                                                       "namespace": "dragonfly"}})
    return w


@pytest.fixture
def world(tmp_path: Path) -> Iterator[JobWorld]:
    w = _world(tmp_path)
    yield w
    w.kube.close()


def _new(world: World) -> str:
    return world.vault.current("infra/dragonfly", "password")


def _leftover_values(world: World) -> list[str]:
    return [k[2] for k in world.kube.objects if k[0] == "Secret" and k[2].endswith("-values")]


def test_the_rotator_runs_set_test_finish_with_values_only_in_a_mounted_secret(
        world: JobWorld, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    assert report.exit_code == 0, report.message
    new = _new(world)
    assert world.jobs.runs == ["set", "test", "finish"]
    assert world.jobs.app.password == new != OLD
    assert all(world.running[c] == new for c in CONSUMERS)
    assert "dragonfly/dragonfly" not in world.rollouts  # changed by the job, never rolled
    for spec in world.jobs.seen_specs:
        text = json.dumps(spec)
        assert_no_secret(text, OLD, new)  # never in env, args or the spec
        pod = spec["template"]["spec"]
        assert pod["containers"][0]["volumeMounts"][0]["mountPath"] == VALUES_DIR
        assert pod["serviceAccountName"] == "rotator" and spec["backoffLimit"] == 0
        assert spec["activeDeadlineSeconds"] == 30
    assert _leftover_values(world) == []  # each phase's values Secret deleted after it
    assert world.kube.get("Job", "dragonfly", job_name("dragonfly", report.run_id, "set"))


def test_a_resumed_run_observes_a_succeeded_phase_and_does_not_run_it_again(
        world: JobWorld, tmp_path: Path) -> None:
    world.jobs.faults["test"] = "fail"
    failed = run(world, tmp_path)
    assert failed.exit_code == 12, failed.message
    assert world.jobs.runs == ["set", "test"]
    world.jobs.faults.clear()
    again = resume(world, tmp_path, failed.run_id)
    assert again.exit_code == 0, again.message
    assert world.jobs.runs == ["set", "test", "test", "finish"]  # set observed, not re-run
    assert world.jobs.app.changes == ["set"]
    assert all(world.running[c] == _new(world) for c in CONSUMERS)


def test_a_rotator_that_exits_non_zero_fails_with_its_redacted_log_tail(
        world: JobWorld, tmp_path: Path) -> None:
    world.jobs.faults["set"] = "fail"
    report = run(world, tmp_path)
    assert report.exit_code == 12
    assert "the rotator exited non-zero" in report.message
    assert "login with (redacted) refused" in report.message
    assert "old was (redacted)" in report.message
    assert_no_secret(report.message, OLD, _new(world))
    journal = (tmp_path / "state" / "runs" / report.run_id / "journal.jsonl").read_text()
    assert_no_secret(journal, OLD, _new(world))
    assert _leftover_values(world) == []
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert world.jobs.app.password == OLD
    assert all(world.running[c] == OLD for c in CONSUMERS)


def test_a_hanging_rotator_fails_at_its_deadline_and_resume_ends_consistent(
        world: JobWorld, tmp_path: Path) -> None:
    world.jobs.faults["set"] = "hang"
    report = run(world, tmp_path)
    assert report.exit_code == 12
    assert "exceeded its deadline of 30s" in report.message
    world.jobs.faults.clear()
    again = resume(world, tmp_path, report.run_id)
    assert again.exit_code == 0, again.message
    assert world.jobs.app.password == _new(world)
    assert all(world.running[c] == _new(world) for c in CONSUMERS)


def test_a_job_deleted_mid_run_is_named_and_rollback_restores_the_old_value(
        world: JobWorld, tmp_path: Path) -> None:
    world.jobs.faults["test"] = "delete"
    report = run(world, tmp_path)
    assert report.exit_code == 12
    assert "the Job was deleted while it ran" in report.message
    assert world.jobs.app.password == _new(world)  # set had run
    world.jobs.faults.clear()
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert world.jobs.runs[-2:] == ["undo-set", "undo-test"]
    assert world.jobs.app.password == OLD
    assert all(world.running[c] == OLD for c in CONSUMERS)
    assert _leftover_values(world) == []


def test_a_rollback_after_success_runs_the_set_phase_with_the_old_value(
        world: JobWorld, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    assert report.exit_code == 0, report.message
    back = rollback(world, tmp_path, report.run_id)
    assert back.exit_code == 0, back.message
    assert world.jobs.runs == ["set", "test", "finish", "undo-set", "undo-test"]
    assert world.jobs.app.password == OLD
    assert all(world.running[c] == OLD for c in CONSUMERS)


def test_a_template_holding_the_value_is_refused_in_preflight(tmp_path: Path) -> None:
    leaky = dataclasses.replace(TEMPLATE, args=("--password", OLD))
    world = _world(tmp_path, leaky)
    try:
        with pytest.raises(PreflightFailed) as failed:
            run(world, tmp_path)
        assert failed.value.exit_code == 3
        message = str(failed.value)
        assert "args[1]" in message and "remove it from the chain's job" in message
        assert_no_secret(message, OLD)
        assert world.jobs.runs == [] and world.vault.current("infra/dragonfly",
                                                               "password") == OLD
    finally:
        world.kube.close()


def test_job_names_are_stable_per_run_and_phase_and_fit_a_label() -> None:
    a = job_name("x" * 50, "run-1", "undo-finish")
    assert a == job_name("x" * 50, "run-1", "undo-finish") and len(a) <= 63
    assert job_name("c", "run-1", "set") != job_name("c", "run-2", "set")
    assert redact(f"a {OLD} b", Secret(OLD)) == "a (redacted) b"


def test_an_init_only_provider_with_a_plain_rollout_is_refused_with_the_fix(
        tmp_path: Path) -> None:
    world = World(make_chain(tmp_path))  # dragonfly: apply: rollout (the default)
    world.setup(OLD)
    world.kube.raw("Deployment", "dragonfly", "dragonfly")["metadata"]["annotations"][
        "rotate.dev/init-only"] = "true"
    try:
        with pytest.raises(PreflightFailed) as failed:
            run(world, tmp_path)
        message = str(failed.value)
        assert failed.value.exit_code == 3
        assert "init-only" in message and "a rollout would change nothing" in message
        assert "apply: job" in message
        assert world.vault.current("infra/dragonfly", "password") == OLD
    finally:
        world.kube.close()


def test_an_init_only_provider_changed_by_a_job_passes_preflight(tmp_path: Path) -> None:
    world = _world(tmp_path)
    world.kube.raw("Deployment", "dragonfly", "dragonfly")["metadata"]["annotations"][
        "rotate.dev/init-only"] = "true"
    try:
        report = run(world, tmp_path)
        assert report.exit_code == 0, report.message
    finally:
        world.kube.close()


def test_a_job_an_earlier_attempt_left_running_is_waited_for_not_created_again(
        world: JobWorld, tmp_path: Path) -> None:
    world.jobs.faults["set"] = "pending"  # the Job runs past the step's deadline (5 s)
    report = run(world, tmp_path)
    assert report.exit_code == 12
    assert "did not end before the step's deadline" in report.message
    name = job_name("dragonfly", report.run_id, "set")
    assert world.kube.get("Job", "dragonfly", name)  # left running, not deleted
    # it ends meanwhile, having done its work
    world.jobs.app.password = _new(world)
    FakeJobs._status(world.kube, "dragonfly", name, "Complete", "CompletionsReached")
    world.jobs.faults.clear()
    again = resume(world, tmp_path, report.run_id)
    assert again.exit_code == 0, again.message
    assert world.jobs.runs == ["set", "test", "finish"]  # set was observed, not re-run
    assert _leftover_values(world) == []


def test_an_earlier_attempts_job_that_fails_while_resume_waits_is_run_once_more(
        world: JobWorld, tmp_path: Path) -> None:
    world.jobs.faults["set"] = "pending"  # a hung rotator: rotate gives up at its deadline
    report = run(world, tmp_path)
    assert report.exit_code == 12
    name = job_name("dragonfly", report.run_id, "set")
    world.jobs.faults.clear()
    original = world.kube.get

    def failing_once(kind: str, namespace: str | None, obj: str) -> dict[str, object]:
        """The hung Job reaches its deadline while the resume waits for it."""
        if (kind, obj) == ("Job", name) and not world.kube.raw(kind, "dragonfly", obj).get(
                "status"):
            FakeJobs._status(world.kube, "dragonfly", name, "Failed", "DeadlineExceeded")
        return original(kind, namespace, obj)

    world.kube.get = failing_once  # type: ignore[method-assign]
    again = resume(world, tmp_path, report.run_id)
    assert again.exit_code == 0, again.message
    assert world.jobs.runs == ["set", "set", "test", "finish"]  # set ran once more
    assert world.jobs.app.password == _new(world)


def test_sigterm_while_a_job_runs_ends_the_wait_and_resume_observes_the_job(
        world: JobWorld, tmp_path: Path) -> None:
    cancel = CancelToken()
    world.jobs.faults["set"] = "pending"

    def cancel_when_the_set_job_runs(kube: object, kind: str, ns: str, name: str) -> None:
        if kind == "Job" and name.endswith("-set"):
            cancel.cancel("SIGTERM")

    world.kube.controllers.append(cancel_when_the_set_job_runs)
    report = run(world, tmp_path, cancel=cancel)
    assert report.exit_code == 130, report.message
    world.kube.controllers.remove(cancel_when_the_set_job_runs)
    name = job_name("dragonfly", report.run_id, "set")
    world.jobs.app.password = _new(world)  # the Job went on and did its work
    FakeJobs._status(world.kube, "dragonfly", name, "Complete", "CompletionsReached")
    world.jobs.faults.clear()
    again = resume(world, tmp_path, report.run_id)
    assert again.exit_code == 0, again.message
    assert world.jobs.runs == ["set", "test", "finish"]
