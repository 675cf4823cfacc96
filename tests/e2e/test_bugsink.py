"""Bugsink, a real init-only app, rotated with ``apply: job`` in a lab started with
``--with bugsink``: the superuser was created from the Secret at Bugsink's first start only,
``rotate bugsink-admin --confirm`` changes its password through the rotator Job, and
Bugsink's own login page — over HTTP, from outside the tool — accepts the new password and
refuses the old one, with a team created before the rotation still there.  Preflight
refuses the same provider configured with a plain rollout (it would change nothing), and a
rollback makes the old password the only one again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rotate_lab.systems import bugsink_web as web

from tests.support.labtools import Lab, newest_run
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

ADMIN = "admin@shop.example"
TEAM = "before-the-rotation"


def _url(lab: Lab) -> str:
    svc = lab.kjson("get", "service", "-n", "bugsink", "bugsink")
    return f"http://{svc['spec']['clusterIP']}:8000"


def _password(lab: Lab) -> str:
    doc = lab.bao("GET", "secret/data/infra/bugsink").json()
    return str(doc["data"]["data"]["password"])


def test_a_plain_rollout_of_the_init_only_app_is_refused_in_preflight(
        bugsink_lab: Lab, tmp_path: Path) -> None:
    lab = bugsink_lab
    shop = Path(lab.env["ROTATE_CHAIN"]).parent
    copy = tmp_path / "shop"
    shutil.copytree(shop, copy)
    chain = copy / "rotate.yaml"
    text = chain.read_text()
    start = text.index("        apply: job\n")
    end = text.index("          deadline: 60s\n") + len("          deadline: 60s\n")
    chain.write_text(text[:start] + text[end:])  # the provider rolls out (the default)
    before = _password(lab)
    result = lab.rotate("bugsink-admin", "--chain", str(chain), "--confirm")
    assert result.code == 3, result.output
    assert "init-only" in result.output and "apply: job" in result.output
    assert _password(lab) == before  # nothing was changed


def test_the_job_rotates_the_superuser_and_bugsinks_login_proves_it(bugsink_lab: Lab) -> None:
    lab = bugsink_lab
    url, old = _url(lab), _password(lab)
    client = web.login(url, ADMIN, old)
    assert client is not None, "the superuser created at first start refuses its password"
    try:
        web.create_team(client, TEAM)
    finally:
        client.close()
    known = set(lab.run_ids())

    result = lab.rotate("bugsink-admin", "--confirm", timeout=300)
    assert result.code == 0, result.output
    new = _password(lab)
    assert new != old
    assert old not in result.output and new not in result.output
    assert web.accepts(url, ADMIN, new)
    assert not web.accepts(url, ADMIN, old)
    after = web.login(url, ADMIN, new)
    assert after is not None
    try:
        assert TEAM in web.team_names(after)  # the data is still there
    finally:
        after.close()
    # one Job per phase, their values Secrets gone
    jobs = lab.kjson("get", "jobs", "-n", "bugsink")["items"]
    phases = sorted(j["metadata"]["labels"]["rotate.dev/phase"] for j in jobs)
    assert phases == ["finish", "set", "test"]
    secrets = lab.kjson("get", "secrets", "-n", "bugsink")["items"]
    assert not [s for s in secrets if s["metadata"]["name"].endswith("-values")]
    for job in jobs:
        spec = str(job["spec"])
        assert old not in spec and new not in spec

    run_id = newest_run(lab, known)
    assert run_id is not None
    back = lab.rotate("rollback", run_id, "--confirm", timeout=300)
    assert back.code == 0, back.output
    assert web.accepts(url, ADMIN, old)
    assert not web.accepts(url, ADMIN, new)
    assert _password(lab) == old


def _chain_with_deadline(lab: Lab, tmp_path: Path, deadline: str) -> Path:
    """A copy of the lab's chain whose rotator Job has ``deadline``."""
    copy = tmp_path / "shop"
    shutil.copytree(Path(lab.env["ROTATE_CHAIN"]).parent, copy)
    chain = copy / "rotate.yaml"
    chain.write_text(chain.read_text().replace("          deadline: 60s\n",
                                               f"          deadline: {deadline}\n"))
    return chain


def _consistent(lab: Lab, url: str) -> None:
    """OpenBao's value is the only one Bugsink's login accepts, and no values Secret is
    left."""
    current = _password(lab)
    assert web.accepts(url, ADMIN, current)
    versions = lab.bao("GET", "secret/metadata/infra/bugsink").json()["data"]["versions"]
    for number in versions:
        doc = lab.bao("GET", f"secret/data/infra/bugsink?version={number}").json()
        other = str(doc["data"]["data"]["password"])
        if other != current:
            assert not web.accepts(url, ADMIN, other), f"version {number} still logs in"
    secrets = lab.kjson("get", "secrets", "-n", "bugsink")["items"]
    assert not [s for s in secrets if s["metadata"]["name"].endswith("-values")]


def test_a_rotator_that_exits_non_zero_is_resumed_to_a_consistent_end(
        bugsink_lab: Lab) -> None:
    lab, url = bugsink_lab, _url(bugsink_lab)
    known = set(lab.run_ids())
    lab.fault("rotator-fail", "test")
    try:
        failed = lab.rotate("bugsink-admin", "--confirm", timeout=300)
    finally:
        lab.fault("rotator-fail", clear=True)
    assert failed.code == 12, failed.output
    assert "the rotator exited non-zero" in failed.output
    assert "lab fault rotator-fail" in failed.output  # the pod's log tail
    run_id = newest_run(lab, known)
    assert run_id is not None
    resumed = lab.rotate("resume", run_id, "--confirm", timeout=300)
    assert resumed.code == 0, resumed.output
    _consistent(lab, url)


def test_a_hanging_rotator_fails_at_its_deadline_and_rolls_back(
        bugsink_lab: Lab, tmp_path: Path) -> None:
    lab, url = bugsink_lab, _url(bugsink_lab)
    before = _password(lab)
    chain = _chain_with_deadline(lab, tmp_path, "5s")
    known = set(lab.run_ids())
    lab.fault("rotator-hang", "set")
    try:
        failed = lab.rotate("bugsink-admin", "--chain", str(chain), "--confirm", timeout=300)
    finally:
        lab.fault("rotator-hang", clear=True)
    assert failed.code == 12, failed.output
    assert "exceeded its deadline of 5s" in failed.output
    run_id = newest_run(lab, known)
    assert run_id is not None
    back = lab.rotate("rollback", run_id, "--chain", str(chain), "--confirm", timeout=300)
    assert back.code == 0, back.output
    assert _password(lab) == before
    _consistent(lab, url)


def test_a_job_deleted_mid_run_is_named_and_resumed(bugsink_lab: Lab) -> None:
    lab, url = bugsink_lab, _url(bugsink_lab)
    known = set(lab.run_ids())
    lab.fault("rotator-hang", "set")
    try:
        proc = lab.spawn_rotate("bugsink-admin", "--confirm")

        def running_set_job() -> str | None:
            jobs = lab.kjson("get", "jobs", "-n", "bugsink")["items"]
            return next((j["metadata"]["name"] for j in jobs
                         if j["metadata"]["labels"].get("rotate.dev/phase") == "set"
                         and not (j.get("status") or {}).get("conditions")), None)

        name = eventually(running_set_job, 120, "the run's set Job is running")
        lab.kubectl("delete", "job", "-n", "bugsink", name)  # as a human would
        out, err = proc.communicate(timeout=300)
    finally:
        lab.fault("rotator-hang", clear=True)
    assert proc.returncode == 12, out + err
    assert "the Job was deleted while it ran" in out + err
    run_id = newest_run(lab, known)
    assert run_id is not None
    resumed = lab.rotate("resume", run_id, "--confirm", timeout=300)
    assert resumed.code == 0, resumed.output
    _consistent(lab, url)
