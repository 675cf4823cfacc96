"""The overlap strategy on the lab: `rotate dragonfly-acl --confirm --strategy overlap` while
search serves traffic through the API server's service proxy — no request may fail.

search's ``/work`` does a real round trip to Dragonfly as the ACL user ``search`` (its
``cache`` section), so a request fails the moment Dragonfly stops accepting the password
search started with.  The load runs from before the rotation until after it, one request at
a time on a kept-alive connection, bounded in time.
"""

from __future__ import annotations

import json

import pytest

from tests.support.labtools import SHOP, Lab, scan
from tests.support.polling import eventually
from tests.support.proxy_load import Load, acl_auth

pytestmark = pytest.mark.lab

ACL_PATH = "secret/data/infra/dragonfly-acl"


def acl_passwords(lab: Lab) -> dict[str, str]:
    return dict(lab.bao("GET", ACL_PATH).json()["data"]["data"])


def test_overlap_rotation_drops_no_request(lab: Lab) -> None:
    before = acl_passwords(lab)
    old = before["password"]
    assert before["password_previous"] == old  # the lab seeds a settled state
    dragonfly = lab.status()["parts"]["dragonfly"]["addr"]
    assert acl_auth(dragonfly, "search", old)
    revisions = lab.revisions()

    with Load(lab) as load:
        # the load is flowing before the rotation starts
        eventually(lambda: load.ok >= 5 or load.failures or None, 10, "load to flow")
        assert load.ok >= 5, load.failures
        counted = load.ok
        result = lab.rotate("dragonfly-acl", "--confirm", "--strategy", "overlap", "-o", "json",
                            timeout=60)
        # and still flows after it: the new search pod and Dragonfly's second roll are used
        settled = load.ok
        eventually(lambda: load.ok >= settled + 5 or None, 10, "load after the rotation")
    assert result.code == 0, result.output
    assert load.failures == [], load.failures
    assert load.ok > counted + 5

    report = json.loads(result.stdout)
    kinds = [s["kind"] for s in report["steps"]]
    assert kinds[kinds.index("readyz.check") + 1:] == [
        "backend.retire", "sync.wait", "provider.restart", "provider.wait", "token.revoke",
        "backend.confirm"]

    after = acl_passwords(lab)
    new = after["password"]
    assert new != old and after["password_previous"] == new
    assert lab.secret_value("dragonfly", "dragonfly-acl-secret", "password_previous") == new
    # Dragonfly accepts only the new password for search; the other credential is untouched
    assert acl_auth(dragonfly, "search", new)
    assert not acl_auth(dragonfly, "search", old)
    assert lab.dragonfly_auth(lab.bao_password())
    doc = lab.bootstrap("search")
    assert doc["value"]["cache"]["password"] == new
    assert {svc: lab.readyz(svc) for svc in SHOP} == dict.fromkeys(SHOP, 200)
    # Dragonfly rolled twice (phase 1 and 2), search once, nobody else
    now = lab.revisions()
    assert now["dragonfly"] == revisions["dragonfly"] + 2
    assert now["search"] == revisions["search"] + 1
    assert {s: r for s, r in now.items() if s not in ("dragonfly", "search")} == {
        s: r for s, r in revisions.items() if s not in ("dragonfly", "search")}
    journal = json.dumps(lab.journal_events(report["run_id"]))
    assert scan([("journal", journal), ("output", result.output)], [old, new]) == []


def test_rollback_of_the_overlap_run_drops_no_request_either(lab: Lab) -> None:
    runs = json.loads(lab.rotate("runs", "-o", "json").stdout)["runs"]
    run_id = next(r["run_id"] for r in runs
                  if r["credential"] == "dragonfly-acl" and r["status"] == "succeeded")
    rotated = acl_passwords(lab)["password"]
    original = lab.bao("GET", ACL_PATH + "?version=1").json()["data"]["data"]["password"]
    dragonfly = lab.status()["parts"]["dragonfly"]["addr"]

    with Load(lab) as load:
        eventually(lambda: load.ok >= 5 or load.failures or None, 10, "load to flow")
        result = lab.rotate("rollback", run_id, "--confirm", timeout=60)
        settled = load.ok
        eventually(lambda: load.ok >= settled + 5 or None, 10, "load after the rollback")
    assert result.code == 0, result.output
    assert load.failures == [], load.failures

    after = acl_passwords(lab)
    assert after["password"] == original and after["password_previous"] == original
    assert acl_auth(dragonfly, "search", original)
    assert not acl_auth(dragonfly, "search", rotated)
    assert lab.bootstrap("search")["value"]["cache"]["password"] == original
    assert {svc: lab.readyz(svc) for svc in SHOP} == dict.fromkeys(SHOP, 200)
