"""The acceptance of issue 2, checked from outside the tool.

One lab for the module: a dry run changes nothing, a schema violation stops in preflight
with exit 3, then one real rotation is checked through OpenBao's HTTP API, kubectl, the
Config Center API and a raw Redis AUTH, and everything the run wrote is scanned for the
values it used.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.labtools import CONSUMERS, SHOP, Lab, scan

pytestmark = pytest.mark.lab


def snapshot(lab: Lab) -> dict[str, object]:
    return {
        "bao": lab.bao_version(),
        "secret_rv": lab.kjson("get", "secret", "-n", "dragonfly", "dragonfly-password-secret")[
            "metadata"
        ]["resourceVersion"],
        "revisions": lab.revisions(),
        "cc": {svc: lab.bootstrap(svc)["version"] for svc in SHOP},
    }


def test_plan_changes_nothing(lab: Lab) -> None:
    before = snapshot(lab)
    res = lab.rotate("dragonfly")
    assert res.code == 0, res.output
    for word in ("backend.write", "sync.wait", "provider.apply", "provider.verify",
                 "config.write", "readyz.check"):
        assert word in res.output
    assert "provider.restart" not in res.output  # Dragonfly's password is changed live
    # the default: overlap (an ACL user holds two values) — the new password is added, the
    # consumers move, then the old one is retired
    plan = lab.rotate("dragonfly", "-o", "json")
    assert plan.code == 0, plan.output
    doc = json.loads(plan.stdout)
    assert doc["strategy"] == "overlap", doc["strategy_reason"]
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds.index("sync.wait") < kinds.index("provider.apply") < kinds.index(
        "consumer.restart") < kinds.index("readyz.check") < kinds.index("provider.retire")
    plan = lab.rotate("dragonfly", "--strategy", "restart", "-o", "json")
    assert plan.code == 0, plan.output
    doc = json.loads(plan.stdout)
    assert doc["kind"] == "plan" and doc["consumers"] == ["cart", "order", "user"]
    kinds = [s["kind"] for s in doc["steps"]]
    assert "provider.retire" not in kinds
    assert kinds.index("backend.write") < kinds.index("sync.trigger") < kinds.index("sync.wait")
    # restart strategy: the consumers are prepared while ESO reacts, before the provider
    # switches (chain.md "Order"); Dragonfly's password is changed live (redis-acl), then
    # proven from outside
    assert kinds.index("sync.trigger") < kinds.index("config.write") < kinds.index(
        "consumer.restart") < kinds.index("sync.wait") < kinds.index(
        "provider.apply") < kinds.index("provider.verify")
    assert kinds.index("provider.verify") < kinds.index("consumer.wait") < kinds.index(
        "readyz.check")
    assert snapshot(lab) == before


def test_schema_violation_stops_in_preflight(lab: Lab, tmp_path: Path) -> None:
    before = snapshot(lab)
    chain = Path(lab.env["ROTATE_CHAIN"])
    text = chain.read_text().replace(
        "/dragonfly/port: {service: {namespace: dragonfly, name: dragonfly, port: 6379, "
        "part: port}}",
        "/dragonfly/port: {literal: not-a-port}",
        1,
    )
    text = text.replace("schema: schemas/", f"schema: {chain.parent / 'schemas'}/")
    bad = tmp_path / "rotate.yaml"
    bad.write_text(text)
    res = lab.rotate("dragonfly", "--confirm", "--chain", str(bad))
    assert res.code == 3, res.output
    assert "cart" in res.output and "/dragonfly/port" in res.output
    assert snapshot(lab) == before


def test_rotation_end_to_end(lab: Lab) -> None:
    old_version = lab.bao_version()
    old_password = lab.bao_password()
    revs_before = lab.revisions()
    assert lab.dragonfly_auth(old_password)

    # the hard cut, explicitly: this test checks its order (the consumers prepared beside
    # the wait for ESO, the switch after) and the old password refused at once
    res = lab.rotate("dragonfly", "--confirm", "--strategy", "restart", "-o", "json")
    assert res.code == 0, res.output
    report = json.loads(res.stdout)
    assert report["kind"] == "run" and report["status"] == "succeeded"
    assert report["backend"]["previous_version"] == old_version
    assert report["backend"]["version"] == old_version + 1

    # OpenBao holds exactly one new version, and the Secret holds it.
    assert lab.bao_version() == old_version + 1
    new_password = lab.bao_password()
    assert new_password != old_password
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == new_password

    # Dragonfly accepts the new password and refuses the old.
    assert lab.dragonfly_auth(new_password)
    assert not lab.dragonfly_auth(old_password)

    # cart, order, user rolled exactly once; the other seven (and nothing else) did not.
    revs_after = lab.revisions()
    for svc in SHOP:
        expected = revs_before[svc] + (1 if svc in CONSUMERS else 0)
        assert revs_after[svc] == expected, (svc, revs_before[svc], revs_after[svc])
    # apply: redis-acl — the password changed in place, Dragonfly not restarted
    assert revs_after["dragonfly"] == revs_before["dragonfly"]

    # Their bootstrap documents carry the new password.
    for svc in CONSUMERS:
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == new_password

    # Every readyz is 200.
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}

    # The consumers were prepared beside the wait for ESO (chain.md "Order"): the wait
    # started before the first restart was proven, and the switch came after both.
    records = lab.journal_events(report["run_id"])

    def lines(event: str, kind: str) -> list[int]:
        return [i for i, r in enumerate(records) if (r["event"], r.get("kind")) == (event, kind)]

    restarted = lines("step.done", "consumer.restart")
    assert len(restarted) == len(CONSUMERS)
    # two sync.waits: the chain's ExternalSecret, then the reports namespace's own one
    (wait_start, _), waits_done = lines("step.start", "sync.wait"), lines("step.done", "sync.wait")
    [switch] = lines("step.start", "provider.apply")
    assert wait_start < min(restarted)
    assert max(*restarted, *waits_done) < switch
    # the workloads that read the Secret themselves restart once both Secrets are proven
    readers = lines("step.done", "workload.restart")
    assert len(readers) == 2 and max(waits_done) < min(readers) and max(readers) < switch

    # Events tell the story where operators look, with the run id, on what the run changed.
    run_id = report["run_id"]
    assert report["events"]["failed"] == 0 and report["events"]["created"] >= 5 * len(CONSUMERS)
    shop = lab.kjson("get", "events", "-n", "shop")["items"]
    ours = [e for e in shop if e.get("reportingInstance") == run_id]
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in ours
            if e["reason"] == "CredentialRotated"} == {("Deployment", c) for c in CONSUMERS}
    assert {e["involvedObject"]["name"] for e in ours if e["reason"] == "TokenMinted"} == {
        f"{c}-config-token" for c in CONSUMERS}
    assert all(run_id in e["message"] and e["source"]["component"] == "rotate" for e in ours)
    described = lab.kubectl("describe", "deployment", "cart", "-n", "shop")
    for reason in ("ConfigWritten", "RolloutRestarted", "TokensRevoked", "CredentialRotated"):
        assert reason in described, described
    assert run_id in described
    es_events = lab.kubectl("describe", "externalsecret", "dragonfly-password", "-n",
                            "dragonfly")
    assert "BackendWritten" in es_events and "CredentialRotated" in es_events, es_events

    # The values never reach any output, journal, event or annotation.
    lab.rotate("runs")
    lab.rotate("show", report["run_id"])
    tokens = [lab.secret_value("shop", f"{svc}-config-token", "token") for svc in SHOP]
    haystacks: list[tuple[str, str]] = []
    for r in lab.transcripts:
        haystacks += [(f"stdout of {r.args[1:]}", r.stdout), (f"stderr of {r.args[1:]}", r.stderr)]
    for f in Path(lab.env["ROTATE_STATE_DIR"]).rglob("*"):
        if f.is_file():
            haystacks.append((str(f), f.read_text(errors="replace")))
    haystacks.append(("events", lab.kubectl("get", "events", "-A", "-o", "json")))
    for kind in (
        "deployments",
        "replicasets",
        "pods",
        "externalsecrets",
        "secrets",
        "leases",
        "services",
        "statefulsets",
    ):
        for item in lab.kjson("get", kind, "-A")["items"]:
            meta = item.get("metadata", {})
            tmpl = item.get("spec", {}).get("template", {}).get("metadata", {})
            haystacks.append(
                (
                    f"{kind} annotations",
                    json.dumps(
                        [meta.get("annotations"), tmpl.get("annotations"), meta.get("labels")]
                    ),
                )
            )
    assert scan(haystacks, [new_password, old_password, *tokens]) == []


def test_doctor_reports_what_the_restricted_identity_lacks(lab: Lab) -> None:
    ok = lab.rotate("doctor")
    assert ok.code == 0, ok.output
    res = lab.rotate("doctor", "--context", "lab-restricted", "-o", "json")
    assert res.code != 0, res.output
    checks = json.loads(res.stdout)["checks"]
    failed = " ".join(c["check"] + " " + c["detail"] for c in checks if not c["ok"])
    assert "secrets" in failed and "deployments" in failed and "leases" in failed
