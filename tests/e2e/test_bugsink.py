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
