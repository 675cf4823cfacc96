"""The lab's CronJob controller (rotate_lab.cluster.controllers.cronjob) as kube-controller-
manager's cronjob controller v2 behaves: on a MiniCluster with the Job controller and the
kubelet running real ``rotate`` processes, a clock the tests move (so a schedule fires
without a minute passing), and real kubectl and the kubernetes client for what users see.
(The doc's CronJob rotating a credential in a full lab: tests/e2e/test_in_cluster.py.)"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rotate_lab.cluster.api import cronschedule as sched
from rotate_lab.cluster.api.store import ApiError

from tests.support.cronjobs import NS, WAITING_IMAGE, CronLab, cronjob
from tests.support.polling import eventually, holds

EVERY_MINUTE = "* * * * *"


def test_a_schedule_time_starts_one_job_named_for_its_minute(cron: CronLab) -> None:
    cron.cluster.apply(cronjob("hourly", "0 * * * *", timeZone="Asia/Kolkata"))
    assert cron.jobs("hourly") == []
    # Asia/Kolkata is UTC+05:30: its full hours are half past in UTC
    at = cron.clock.advance_to_next("0 * * * *", zone="Asia/Kolkata")
    assert time.gmtime(at).tm_min == 30
    cron.tick("hourly")
    [job] = cron.wait_jobs("hourly", 1, "the scheduled Job")
    meta = job["metadata"]
    assert meta["name"] == f"hourly-{int(at) // 60}"
    assert meta["labels"] == {"team": "platform", "batch.kubernetes.io/cronjob-name": "hourly"}
    stamp = meta["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert stamp.endswith("+05:30") and datetime.fromisoformat(stamp).timestamp() == at
    assert meta["annotations"]["rotate.dev/why"] == "test"
    cj = cron.cronjob("hourly")
    assert meta["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "CronJob", "name": "hourly",
        "uid": cj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert [a["name"] for a in cj["status"]["active"]] == [meta["name"]]
    assert cj["status"]["lastScheduleTime"] == datetime.fromtimestamp(at, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")

    done = cron.wait_finished(meta["name"])
    assert done["status"]["succeeded"] == 1

    def settled() -> dict[str, object] | None:
        status = cron.cronjob("hourly").get("status") or {}
        return status if "active" not in status and "lastSuccessfulTime" in status else None

    status = eventually(settled, 30, "the CronJob to see its Job complete")
    assert status["lastSuccessfulTime"] == done["status"]["completionTime"]
    assert sorted(cron.events("hourly")) == ["SawCompletedJob", "SuccessfulCreate"]
    cron.tick("hourly")  # the same schedule time never starts a second Job
    holds(lambda: len(cron.jobs("hourly")) == 1, 0.5, "one Job per schedule time")


def test_missed_schedules_start_only_the_most_recent(cron: CronLab) -> None:
    cron.cluster.apply(cronjob("often", EVERY_MINUTE, image=WAITING_IMAGE))
    cron.clock.advance(10 * 60)  # ten schedule times missed
    cron.tick("often")
    [job] = cron.wait_jobs("often", 1, "one Job for ten missed times")
    latest = sched.parse(EVERY_MINUTE, None).latest_at_or_before(cron.clock())
    assert job["metadata"]["name"] == f"often-{int(latest) // 60}"
    assert "TooManyMissedTimes" not in cron.events("often")

    cron.clock.advance(150 * 60)  # more than 100 missed: a warning, still only the latest
    cron.tick("often")
    jobs = cron.wait_jobs("often", 2, "a second Job")
    latest = sched.parse(EVERY_MINUTE, None).latest_at_or_before(cron.clock())
    assert jobs[-1]["metadata"]["name"] == f"often-{int(latest) // 60}"
    eventually(lambda: "TooManyMissedTimes" in cron.events("often"), 30, "the warning")


def test_a_time_missed_by_more_than_the_starting_deadline_is_skipped(cron: CronLab) -> None:
    cron.cluster.apply(cronjob("late", "0 * * * *", image=WAITING_IMAGE,
                               startingDeadlineSeconds=60))
    at = cron.clock.advance_to_next("0 * * * *", plus=120)  # two minutes late
    cron.tick("late")
    holds(lambda: cron.jobs("late") == [], 0.5, "no Job for a time past its deadline")
    assert "lastScheduleTime" not in (cron.cronjob("late").get("status") or {})

    cron.clock.set(at + 3600 + 30)  # the next hour, 30 s late: in time
    cron.tick("late")
    [job] = cron.wait_jobs("late", 1, "the Job of the next hour")
    assert job["metadata"]["name"] == f"late-{int(at + 3600) // 60}"


@pytest.mark.parametrize(("policy", "running"), [("Allow", 2), ("Forbid", 1), ("Replace", 1)])
def test_the_concurrency_policy(cron: CronLab, policy: str, running: int) -> None:
    cron.cluster.apply(cronjob("busy", EVERY_MINUTE, image=WAITING_IMAGE,
                               concurrencyPolicy=policy))
    cron.clock.advance_to_next(EVERY_MINUTE)
    cron.tick("busy")
    [first] = cron.wait_jobs("busy", 1, "the first Job")
    eventually(lambda: cron.cluster.pods(NS, "batch.kubernetes.io/job-name="
                                         + first["metadata"]["name"]), 30, "its pod")
    second = sched.job_name("busy", cron.clock.advance_to_next(EVERY_MINUTE))
    cron.tick("busy")

    def active() -> list[str] | None:
        names = [a["name"] for a in cron.cronjob("busy").get("status", {}).get("active", [])]
        jobs = [j["metadata"]["name"] for j in cron.jobs("busy")]
        return names if len(names) == running and sorted(jobs) == sorted(names) \
            and (second in names or policy == "Forbid") else None

    if policy == "Forbid":
        eventually(lambda: "JobAlreadyActive" in cron.events("busy"), 30, "the skip")
        assert active() == [first["metadata"]["name"]]
        # the skipped time is not started later, when the first Job is gone
        holds(lambda: len(cron.jobs("busy")) == 1, 0.3, "no second Job")
        return
    names = eventually(active, 30, f"{running} active Job(s) under {policy}")
    if policy == "Allow":
        assert names == [first["metadata"]["name"], second]
        return
    assert names == [second]
    eventually(lambda: not cron.cluster.pods(NS, "batch.kubernetes.io/job-name="
                                             + first["metadata"]["name"], terminating=True),
               30, "the replaced Job's pod to go")
    assert "SuccessfulDelete" in cron.events("busy")


def test_history_limits_keep_the_newest_finished_jobs(cron: CronLab) -> None:
    cron.cluster.apply(cronjob("kept", EVERY_MINUTE, successfulJobsHistoryLimit=1))
    names = []
    for _ in range(2):
        names.append(sched.job_name("kept", cron.clock.advance_to_next(EVERY_MINUTE)))
        cron.tick("kept")
        eventually(lambda: names[-1] in {j["metadata"]["name"] for j in cron.jobs("kept")},
                   30, "the Job")
        cron.wait_finished(names[-1])
    eventually(lambda: [j["metadata"]["name"] for j in cron.jobs("kept")] == names[1:], 30,
               "the older succeeded Job to be deleted")
    assert not cron.cluster.pods(NS, f"batch.kubernetes.io/job-name={names[0]}",
                                 terminating=True)

    # created with the clock already past a schedule time: that missed time starts at once
    cron.cluster.apply(cronjob("failing", EVERY_MINUTE, args=("--no-such-option",),
                               failedJobsHistoryLimit=0))

    def pruned() -> bool:
        status = cron.cronjob("failing").get("status") or {}
        return "SuccessfulDelete" in cron.events("failing") and cron.jobs("failing") == [] \
            and "lastScheduleTime" in status and "active" not in status

    eventually(pruned, 30, "the failed Job deleted at once (limit 0)")
    assert not [p for p in cron.cluster.pods(NS, terminating=True)
                if p["metadata"]["name"].startswith("failing-")]


def test_a_suspended_cronjob_starts_nothing_until_resumed(cron: CronLab) -> None:
    cron.cluster.apply(cronjob("paused", EVERY_MINUTE, image=WAITING_IMAGE, suspend=True))
    cron.clock.advance(5 * 60)
    cron.tick("paused")
    holds(lambda: cron.jobs("paused") == [], 0.5, "no Job while suspended")
    cron.cluster.store.patch("CronJob", NS, "paused", {"spec": {"suspend": False}},
                             "merge")
    [job] = cron.wait_jobs("paused", 1, "the missed time started on resume")
    latest = sched.parse(EVERY_MINUTE, None).latest_at_or_before(cron.clock())
    assert job["metadata"]["name"] == f"paused-{int(latest) // 60}"


def test_kubectl_and_the_kubernetes_client_see_cronjobs(
        cron: CronLab, cron_kubectl: Callable[..., str], tmp_path: Path) -> None:
    from kubernetes import client, config

    # daily at this minute: on the real clock it comes again only tomorrow
    daily = time.strftime("%M %H * * *", time.gmtime())
    cron.cluster.apply(cronjob("shown", daily, image=WAITING_IMAGE))
    table = cron_kubectl("get", "cronjobs", "-n", NS)
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE",
                              "LAST", "SCHEDULE", "AGE"]
    assert row.split()[:6] == ["shown", *daily.split()]
    assert row.split()[7:10] == ["False", "0", "<none>"]

    # A missed schedule on the real clock, as on any cluster: move lastScheduleTime back
    # through the status subresource and the controller starts the most recent time.
    earlier = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 180))
    cron_kubectl("patch", "cronjob", "-n", NS, "shown", "--subresource=status",
                 "--type=merge", "-p", f'{{"status":{{"lastScheduleTime":"{earlier}"}}}}')
    [job] = cron.wait_jobs("shown", 1, "the missed time started")
    row = eventually(lambda: next((ln for ln in cron_kubectl(
        "get", "cronjobs", "-n", NS).splitlines()[1:] if ln.split()[8] == "1"), None), 30,
        "ACTIVE 1 in kubectl's table")
    assert row.split()[9].endswith("s"), row  # LAST SCHEDULE: seconds ago
    listed = cron_kubectl("get", "jobs", "-n", NS, "-l", "batch.kubernetes.io/cronjob-name")
    assert job["metadata"]["name"] in listed

    api = client.BatchV1Api(config.new_client_from_config(str(tmp_path / "kubeconfig")))
    status = api.read_namespaced_cron_job_status("shown", NS).status
    assert [ref.name for ref in status.active] == [job["metadata"]["name"]]
    assert status.last_schedule_time.timestamp() == sched.parse(
        daily, None).latest_at_or_before(time.time())
    [listed_cj] = api.list_namespaced_cron_job(NS).items
    assert listed_cj.spec.concurrency_policy == "Allow"
    assert listed_cj.spec.successful_jobs_history_limit == 3

    manifest = tmp_path / "broken.json"
    manifest.write_text(json.dumps(cronjob("broken", "61 * * * *")))
    bad = cron_kubectl("apply", "-f", str(manifest), ok=False)
    assert 'spec.schedule: Invalid value: "61 * * * *"' in bad, bad
    with pytest.raises(ApiError) as info:
        cron.cluster.apply(cronjob("zoned", EVERY_MINUTE, timeZone="Mars/Olympus"))
    assert info.value.code == 422


def _utc(stamp: str) -> float:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("expr", "zone", "after", "expected"), [
    # day-of-month OR day-of-week when both are restricted, as cron (robfig's ParseStandard)
    ("17 3 1-7 * 1", None, "2026-12-08T00:00:00", "2026-12-14T03:17:00"),
    ("@hourly", None, "2026-12-05T04:10:00", "2026-12-05T05:00:00"),
    # 02:30 on the spring-forward day does not exist in Berlin: the next day's 02:30 (CET)
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T02:00:00", "2026-03-30T00:30:00"),
    ("0 9 * * *", "Asia/Kolkata", "2026-12-05T00:00:00", "2026-12-05T03:30:00"),
])
def test_schedule_times(expr: str, zone: str | None, after: str, expected: str) -> None:
    assert sched.parse(expr, zone).next_after(_utc(after)) == _utc(expected)


@pytest.mark.parametrize(("expr", "reason"), [
    ("TZ=UTC 0 * * * *", "UnsupportedSchedule"), ("* * * * * *", "UnparseableSchedule"),
    ("61 * * * *", "UnparseableSchedule"), ("", "UnparseableSchedule")])
def test_schedules_the_controller_refuses(expr: str, reason: str) -> None:
    with pytest.raises(sched.ScheduleError) as info:
        sched.parse(expr, None)
    assert info.value.reason == reason


def test_the_most_recent_time_and_the_starting_deadline() -> None:
    every = sched.parse(EVERY_MINUTE, None)
    created, now = _utc("2026-12-05T04:00:30"), _utc("2026-12-05T04:10:20")
    due = sched.most_recent(every, created=created, last_scheduled=None, now=now,
                            deadline_seconds=None)
    assert (due.most_recent, due.many_missed) == (_utc("2026-12-05T04:10:00"), False)
    late = sched.most_recent(every, created=created, last_scheduled=None,
                             now=now + 300 * 60, deadline_seconds=None)
    assert late.many_missed
    within = sched.most_recent(every, created=created, last_scheduled=None, now=now,
                               deadline_seconds=10)
    assert within.most_recent is None  # 04:10:00 is 20 s old, the deadline 10 s
    assert sched.wake_after(every, created=created, last_scheduled=None, now=now) == \
        pytest.approx(40.1)
