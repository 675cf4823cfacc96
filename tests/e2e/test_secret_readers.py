"""Workloads that read the credential's Secret themselves are consumers (chain.md "Workloads
that read the Secret"), checked from outside the tool on one lab.

A Deployment applied by hand that reads the Dragonfly Secret through env is found by the
plan and runs on the new value after the run; the lab's ``reports`` namespace has its own
ExternalSecret of the same path, which the run forces and proves; a chain with no
``configCenter`` (and no Config Center variables) rotates a credential whose consumers only
read Secrets, and rolls it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.labtools import SHOP, Lab
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

HAND_MADE = "cache-probe"


def env_reader(name: str, namespace: str = "dragonfly") -> dict[str, Any]:
    """A sample service reading the Dragonfly password from Secret dragonfly-password-secret
    through env (no Config Center)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{
                "name": name, "image": "ghcr.io/example/shop-service:1.0",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "DRAGONFLY_HOST", "value": "dragonfly.dragonfly.svc.cluster.local"},
                    {"name": "DRAGONFLY_PASSWORD", "valueFrom": {"secretKeyRef": {
                        "name": "dragonfly-password-secret", "key": "password"}}},
                ],
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"},
                                   "periodSeconds": 1, "failureThreshold": 3},
            }]},
        }},
    }


def ready(lab: Lab, ns: str, name: str) -> dict[str, Any] | None:
    """The Deployment once its rollout is complete with every replica Ready."""
    d = lab.kjson("get", "deployment", "-n", ns, name)
    status, want = d.get("status") or {}, d["spec"].get("replicas", 1)
    done = (status.get("observedGeneration", 0) >= d["metadata"].get("generation", 0)
            and status.get("updatedReplicas") == want and status.get("readyReplicas") == want
            and status.get("replicas") == want)
    return d if done else None


def restarted_at(d: dict[str, Any]) -> str:
    notes = d["spec"]["template"]["metadata"].get("annotations") or {}
    return str(notes.get("kubectl.kubernetes.io/restartedAt", ""))


def with_dragonfly_namespace(lab: Lab, tmp_path: Path) -> str:
    """The lab's chain searching the credential's own namespace too (the lab's searches only
    reports: listing a namespace grants rotate every workload there)."""
    chain = Path(lab.env["ROTATE_CHAIN"])
    text = chain.read_text().replace("namespaces: [reports]", "namespaces: [dragonfly, reports]")
    assert "[dragonfly, reports]" in text
    copy = tmp_path / "rotate.yaml"
    copy.write_text(text)
    (tmp_path / "schemas").symlink_to(chain.parent / "schemas")  # named relative to the file
    return str(copy)


def test_a_hand_made_env_reader_is_found_and_runs_on_the_new_value(lab: Lab,
                                                                   tmp_path: Path) -> None:
    chain = with_dragonfly_namespace(lab, tmp_path)
    lab.kubectl_apply(env_reader(HAND_MADE))
    eventually(lambda: ready(lab, "dragonfly", HAND_MADE), 60, f"{HAND_MADE} Ready")
    # the hard cut: this test checks that a reader restarts before the provider switches
    plan = lab.rotate("dragonfly", "-o", "json", "--strategy", "restart", "--chain", chain)
    assert plan.code == 0, plan.output
    doc = json.loads(plan.stdout)
    found = {r["workload"]: r["reads"] for r in doc["workload_consumers"]}
    ref = f"deployment/dragonfly/{HAND_MADE}"
    assert "env DRAGONFLY_PASSWORD" in found[ref] and found[ref].endswith("restarted")
    assert "not restarted" in found["deployment/reports/report-files"]  # reloads: file
    kinds = [(s["kind"], s["subject"]) for s in doc["steps"]]
    # its restart comes once every Secret is proven, before the provider switches
    assert kinds.index(("sync.wait", "reports/dragonfly-password")) < kinds.index(
        ("workload.restart", ref)) < kinds.index(("provider.apply", "deployment/dragonfly/"
                                                  "dragonfly"))
    assert ("sync.trigger", "reports/dragonfly-password") in kinds
    before = restarted_at(lab.kjson("get", "deployment", "-n", "dragonfly", HAND_MADE))

    run = lab.rotate("dragonfly", "--confirm", "--strategy", "restart", "--chain", chain)
    assert run.code == 0, run.output
    new = lab.bao_password()
    # the reports namespace's own ExternalSecret was forced and holds the new value
    assert lab.secret_value("reports", "dragonfly-credentials", "DRAGONFLY_PASSWORD") == new
    es = lab.kjson("get", "externalsecret", "-n", "reports", "dragonfly-password")
    assert "force-sync" in json.dumps(es["metadata"].get("annotations") or {})
    # the hand-made reader rolled and is Ready: its readiness logs in to Dragonfly with the
    # value its env holds, and Dragonfly refuses the old one
    after = ready(lab, "dragonfly", HAND_MADE)
    assert after is not None and restarted_at(after) != before
    assert not lab.dragonfly_auth(lab.bao_password(lab.bao_version() - 1))
    for name in ("report-env", "report-batch", "report-files"):
        assert ready(lab, "reports", name) is not None, name
    events = lab.kjson("get", "events", "-n", "dragonfly")["items"]
    reasons = {e["reason"] for e in events
               if e["involvedObject"].get("name") == HAND_MADE}
    assert {"RolloutRestarted", "CredentialRotated"} <= reasons
    assert {svc: lab.readyz(svc) for svc in SHOP} == {svc: 200 for svc in SHOP}
    lab.kubectl("delete", "deployment", "-n", "dragonfly", HAND_MADE)


NO_CONFIG_CENTER = """\
apiVersion: rotate/v1
kind: Chain
backend:
  kvMount: secret
  auth: {method: token}
cluster:
  lockNamespace: rotate-system
consumers:
  namespaces: [reports]
credentials:
  dragonfly:
    backend: {path: infra/dragonfly, key: password}
    generate: {length: 40}
    externalSecret: {namespace: dragonfly, name: dragonfly-password}
    secret: {namespace: dragonfly, name: dragonfly-password-secret, key: password}
    providers:
      - {kind: Deployment, namespace: dragonfly, name: dragonfly, apply: redis-acl,
         user: default}
"""


def test_a_chain_without_config_center_rotates_secret_readers(lab: Lab, tmp_path: Path
                                                             ) -> None:
    chain = tmp_path / "readers.yaml"
    chain.write_text(NO_CONFIG_CENTER)
    saved = {v: lab.env.pop(v) for v in ("CONFIG_CENTER_URL", "CONFIG_CENTER_TOKEN")}
    try:  # nothing demands them
        rotate_and_roll_back(lab, chain)
    finally:
        lab.env.update(saved)


def rotate_and_roll_back(lab: Lab, chain: Path) -> None:
    doctor = lab.rotate("doctor", "--chain", str(chain))
    assert doctor.code == 0, doctor.output
    assert "Config Center checks are skipped" in doctor.output
    known = set(lab.run_ids())
    run = lab.rotate("dragonfly", "--chain", str(chain), "--confirm")
    assert run.code == 0, run.output
    assert "config.write" not in run.output and "token.mint" not in run.output
    new = lab.bao_password()
    assert lab.secret_value("reports", "dragonfly-credentials", "DRAGONFLY_PASSWORD") == new
    for name in ("report-env", "report-batch", "report-files"):
        assert ready(lab, "reports", name) is not None, name
    # the shop's documents still hold the old value: roll back, again without a Config Center
    (run_id,) = set(lab.run_ids()) - known
    back = lab.rotate("rollback", run_id, "--chain", str(chain), "--confirm")
    assert back.code == 0, back.output
    assert lab.dragonfly_auth(lab.bao_password(lab.bao_version() - 2))
    for name in ("report-env", "report-batch"):
        assert ready(lab, "reports", name) is not None, name


def all_namespaces_chain(lab: Lab, tmp_path: Path) -> str:
    """The lab's chain with cluster-wide discovery: it names no namespace."""
    chain = Path(lab.env["ROTATE_CHAIN"])
    text = chain.read_text().replace("namespaces: [reports]", "allNamespaces: true")
    assert "allNamespaces: true" in text
    copy = tmp_path / "everywhere.yaml"
    copy.write_text(text)
    (tmp_path / "schemas").symlink_to(chain.parent / "schemas")
    return str(copy)


def copy_of_the_acl_path() -> dict[str, Any]:
    """A further ExternalSecret of dragonfly-acl's path in ``reports``: every key of it
    (dataFrom extract), the previous key included; ESO refreshes it hourly."""
    return {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "search-copy", "namespace": "reports"},
            "spec": {"refreshInterval": "1h", "refreshPolicy": "Periodic",
                     "secretStoreRef": {"name": "openbao", "kind": "SecretStore"},
                     "target": {"name": "search-copy", "creationPolicy": "Owner"},
                     "dataFrom": [{"extract": {"key": "infra/dragonfly-acl"}}]}}


def test_cluster_wide_discovery_moves_readers_of_namespaces_the_chain_does_not_name(
        lab: Lab, tmp_path: Path) -> None:
    """consumers.allNamespaces: a reader in a namespace the chain never names is found and
    rolled, one in a namespace where no copy of the value is made is not (its Secret of the
    same name is another Secret); under overlap, phase 2 forces every ExternalSecret of the
    path again, so no copy keeps the old value under the previous key."""
    chain = all_namespaces_chain(lab, tmp_path)
    name = "cache-probe-all"
    lookalike = env_reader("lookalike", namespace="shop")  # no Dragonfly Secret in shop
    lookalike["spec"]["replicas"] = 0
    lab.kubectl_apply(env_reader(name))
    lab.kubectl_apply(lookalike)
    lab.kubectl_apply(copy_of_the_acl_path())
    eventually(lambda: ready(lab, "dragonfly", name), 60, f"{name} Ready")
    eventually(lambda: lab.kjson("get", "secret", "-n", "reports", "search-copy").get("data"),
               60, "the copy of infra/dragonfly-acl")
    try:
        plan = lab.rotate("dragonfly", "-o", "json", "--chain", chain)
        assert plan.code == 0, plan.output
        doc = json.loads(plan.stdout)
        found = {r["workload"] for r in doc["workload_consumers"]}
        assert {f"deployment/dragonfly/{name}", "deployment/reports/report-env"} <= found
        assert "deployment/shop/lookalike" not in found
        checks = {c["check"]: c for c in doc["preflight"]}
        assert checks["consumers.discovered (all namespaces)"]["ok"]
        before = restarted_at(lab.kjson("get", "deployment", "-n", "dragonfly", name))

        run = lab.rotate("dragonfly", "--confirm", "--chain", chain)
        assert run.code == 0, run.output
        new = lab.bao_password()
        after = ready(lab, "dragonfly", name)
        assert after is not None and restarted_at(after) != before
        assert lab.secret_value("reports", "dragonfly-credentials", "DRAGONFLY_PASSWORD") == new
        for reader in ("report-env", "report-batch"):
            assert ready(lab, "reports", reader) is not None, reader

        acl = lab.rotate("dragonfly-acl", "--confirm", "--chain", chain, "-o", "json")
        assert acl.code == 0, acl.output
        steps = [(s["kind"], s["target"]) for s in json.loads(acl.stdout)["steps"]]
        assert steps.count(("sync.wait", "reports/search-copy")) == 2, steps  # both phases
        current = lab.bao("GET", "secret/data/infra/dragonfly-acl").json()["data"]["data"]
        assert current["password_previous"] == current["password"]
        for key in ("password", "password_previous"):
            assert lab.secret_value("reports", "search-copy", key) == current["password"], key
    finally:
        lab.kubectl("delete", "deployment", "-n", "dragonfly", name)
        lab.kubectl("delete", "deployment", "-n", "shop", "lookalike")
        lab.kubectl("delete", "externalsecret", "-n", "reports", "search-copy")
