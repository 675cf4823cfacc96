"""Least privilege, proven both ways in the lab (issue 9 item 2).

A fresh ServiceAccount bound to exactly what ``rotate rbac dragonfly`` prints (applied with
``kubectl apply -f -``), with an OpenBao token holding exactly the policy ``rotate
vault-policy dragonfly`` prints (``bao policy write`` + ``bao token create
-no-default-policy``):

- (a) passes doctor's dragonfly checks and completes ``rotate dragonfly --confirm``; the
  same for ``dragonfly-acl`` (another consumer, the overlap strategy) with its own account;
- (b) with any single generated rule removed — every RBAC rule and every policy
  capability, the full matrix — doctor names it, and ``rotate dragonfly --confirm`` stops in
  preflight with exit 3 having changed nothing (OpenBao version, the Secret's
  resourceVersion).

The ServiceAccount talks to the lab's API server with its own token (TokenRequest, as
``kubectl create token``), which the lab authorises by the RBAC objects in its store.
Tokens go through files and the environment, never argv.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.labtools import Lab, Result
from tests.support.paths import EXAMPLE_CHAIN

pytestmark = pytest.mark.lab

CHAIN = EXAMPLE_CHAIN
BAO = str(Path(sys.executable).parent / "bao")
SA_NAMESPACE, SA_NAME = "rotate-system", "rotate-lp"
POLICY = SA_NAME  # grant() names the policy after the ServiceAccount


def generated_rbac() -> list[dict[str, Any]]:
    from rotate.chain.loader import load_chain
    from rotate.engine.grants import ServiceAccountRef, rbac_objects

    chain = load_chain(CHAIN)
    return rbac_objects(chain, [chain.credential("dragonfly")],
                        ServiceAccountRef(SA_NAMESPACE, SA_NAME))


def generated_policy() -> list[tuple[str, str]]:
    from rotate.chain.loader import load_chain
    from rotate.engine.grants import policy_grants

    chain = load_chain(CHAIN)
    return [(g.path, cap) for g in policy_grants(chain, [chain.credential("dragonfly")])
            for cap in g.capabilities]


def _rule_cases() -> list[Any]:
    cases = []
    for index, obj in enumerate(generated_rbac()):
        for r, rule in enumerate(obj.get("rules") or []):
            where = obj["metadata"].get("namespace", "cluster")
            names = ",".join(rule.get("resourceNames") or ["*"])
            cases.append(pytest.param(index, r, id=f"{obj['kind']}:{where}:"
                                      f"{'+'.join(rule['verbs'])}:{rule['resources'][0]}:{names}"))
    return cases


@dataclass
class Limited:
    """The lab, seen through the ServiceAccount and the limited OpenBao token."""

    lab: Lab
    env: dict[str, str]
    rbac: list[dict[str, Any]]
    policy_hcl: str

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([str(Path(sys.executable).parent / "rotate"), *args],
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=self.lab.dir)

    def rotate(self, *args: str, timeout: float = 180) -> Result:
        return finish(self.spawn(*args), timeout)

    def snapshot(self) -> tuple[int, str]:
        secret = self.lab.kjson("get", "secret", "-n", "dragonfly", "dragonfly-password-secret")
        return self.lab.bao_version(), str(secret["metadata"]["resourceVersion"])


def finish(proc: subprocess.Popen[str], timeout: float = 180) -> Result:
    stdout, stderr = proc.communicate(timeout=timeout)
    return Result([str(a) for a in proc.args], proc.returncode, stdout, stderr)  # type: ignore[union-attr]


def bao(lab: Lab, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([BAO, *args], env=lab.process_env, capture_output=True, text=True,
                          input=stdin, timeout=30)
    assert proc.returncode == 0, f"bao {args[:2]} failed: {proc.stderr}"
    return proc.stdout


def apply(lab: Lab, objects: list[dict[str, Any]]) -> None:
    lab.kubectl_apply({"apiVersion": "v1", "kind": "List", "items": objects})


def grant(lab: Lab, credential: str, sa_name: str, directory: Path) -> Limited:
    """A fresh ServiceAccount and OpenBao token holding exactly what ``rotate rbac`` and
    ``rotate vault-policy`` print for ``credential`` — as an operator gets them: from the
    CLI, piped to kubectl and bao."""
    sa = f"{SA_NAMESPACE}/{sa_name}"
    rbac = lab.rotate("rbac", credential, "--service-account", sa)
    assert rbac.code == 0, rbac.output
    applied = subprocess.run(["kubectl", "apply", "-f", "-"], env=lab.process_env, text=True,
                             input=rbac.stdout, capture_output=True, timeout=30)
    assert applied.returncode == 0, applied.stderr
    assert f"serviceaccount/{sa_name} created" in applied.stdout
    objects = json.loads(lab.rotate("rbac", credential, "-o", "json", "--service-account",
                                    sa).stdout)["items"]

    policy = lab.rotate("vault-policy", credential)
    assert policy.code == 0, policy.output
    bao(lab, "policy", "write", sa_name, "-", stdin=policy.stdout)
    created = json.loads(bao(lab, "token", "create", f"-policy={sa_name}", "-no-default-policy",
                             "-ttl=1h", "-format=json"))
    assert created["auth"]["policies"] == [sa_name]
    vault_token = created["auth"]["client_token"]

    sa_token = lab.kubectl("create", "token", sa_name, "-n", SA_NAMESPACE).strip()
    config = json.loads(Path(lab.env["KUBECONFIG"]).read_text())
    config["users"] = [{"name": sa_name, "user": {"token": sa_token}}]
    config["contexts"] = [{"name": sa_name, "context": {"cluster": config["clusters"][0]["name"],
                                                        "user": sa_name}}]
    config["current-context"] = sa_name
    path = directory / "kubeconfig"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(config, fh)
    env = {**lab.process_env, "KUBECONFIG": str(path), "BAO_TOKEN": vault_token,
           "VAULT_TOKEN": vault_token}
    return Limited(lab, env, objects, policy.stdout)


@pytest.fixture(scope="module")
def limited(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Limited]:
    granted = grant(lab, "dragonfly", SA_NAME, tmp_path_factory.mktemp("sa"))
    assert granted.rbac == generated_rbac()  # what the rule matrix below removes one by one
    yield granted


def _checks(res: Result) -> dict[str, dict[str, Any]]:
    assert res.code in (0, 3), res.output
    return {c["check"]: c for c in json.loads(res.stdout)["checks"]}


def test_exactly_the_generated_grants_rotate_dragonfly(limited: Limited) -> None:
    lab = limited.lab
    checks = _checks(limited.rotate("doctor", "-o", "json"))
    for name in ("kubernetes.permissions dragonfly", "backend.capabilities dragonfly",
                 "kubernetes.lock-namespace", "backend.reachable"):
        assert checks[name]["ok"], checks[name]
    # ... and nothing more: dragonfly-acl's grants were not generated, so doctor says so
    assert not checks["kubernetes.permissions dragonfly-acl"]["ok"]
    assert not checks["backend.capabilities dragonfly-acl"]["ok"]
    outside = subprocess.run(["kubectl", "get", "secrets", "-n", "shop"], env=limited.env,
                             capture_output=True, text=True, timeout=30)
    assert outside.returncode == 1 and "forbidden" in outside.stderr

    before_version, _ = limited.snapshot()
    res = limited.rotate("dragonfly", "--confirm", "-o", "json")
    assert res.code == 0, res.output
    report = json.loads(res.stdout)
    assert report["status"] == "succeeded"
    assert "warning" not in res.stderr, res.stderr
    assert lab.bao_version() == before_version + 1
    new_password = lab.bao_password()
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == new_password
    assert lab.dragonfly_auth(new_password)
    for svc in ("cart", "order", "user"):
        assert lab.bootstrap(svc)["value"]["dragonfly"]["password"] == new_password


def test_exactly_the_generated_grants_rotate_the_overlap_credential(
        lab: Lab, tmp_path: Path) -> None:
    """dragonfly-acl: another consumer (search) and the overlap strategy's extra steps."""
    acl = grant(lab, "dragonfly-acl", "rotate-acl", tmp_path)
    path = "infra/dragonfly-acl"
    before = int(lab.bao("GET", f"secret/metadata/{path}").json()["data"]["current_version"])
    res = acl.rotate("dragonfly-acl", "--confirm", "-o", "json")
    assert res.code == 0, res.output
    assert json.loads(res.stdout)["status"] == "succeeded"
    assert "warning" not in res.stderr, res.stderr
    after = int(lab.bao("GET", f"secret/metadata/{path}").json()["data"]["current_version"])
    assert after > before


def _stops_in_preflight(limited: Limited, missing: str) -> None:
    """doctor names ``missing``; the rotation exits 3 and changes nothing.  Both run at once:
    they are independent, and the matrix is the slowest part of the suite."""
    before = limited.snapshot()
    doctor = limited.spawn("doctor", "-o", "json")
    rotation = limited.spawn("dragonfly", "--confirm")
    checks, res = _checks(finish(doctor)), finish(rotation)
    failed = " ".join(f"{c['check']}: {c['detail']}" for c in checks.values() if not c["ok"])
    assert missing in failed, failed
    assert res.code == 3, res.output
    assert "nothing was changed" in res.output or "cannot take the lock" in res.output
    assert limited.snapshot() == before


def test_a_consumer_namespace_rotate_may_not_list_is_named_with_the_fix(
        limited: Limited) -> None:
    """Without list on the workloads of ``reports`` (chain consumers.namespaces), a reader
    there would keep the old value unseen: preflight refuses (exit 3, nothing changed),
    naming the namespace and ``rotate rbac``."""
    index = next(i for i, o in enumerate(limited.rbac) if o["kind"] == "Role"
                 and o["metadata"].get("namespace") == "reports")
    obj = copy.deepcopy(limited.rbac[index])
    obj["rules"] = [r for r in obj["rules"] if "deployments" not in r["resources"]]
    before = limited.snapshot()
    try:
        apply(limited.lab, [obj])
        res = limited.rotate("dragonfly", "--confirm")
        assert res.code == 3, res.output
        assert "consumers.discovered reports" in res.output, res.output
        assert "namespace reports" in res.output and "rotate rbac" in res.output
        assert "nothing was changed" in res.output
        assert limited.snapshot() == before
    finally:
        apply(limited.lab, [limited.rbac[index]])


def test_cluster_wide_discovery_without_its_cluster_role_is_named_with_the_fix(
        limited: Limited, tmp_path: Path) -> None:
    """consumers.allNamespaces on an account granted only namespaces: preflight refuses
    (exit 3, nothing changed) naming the cluster-wide grant missing and ``rotate rbac``."""
    text = Path(CHAIN).read_text().replace("namespaces: [reports]", "allNamespaces: true")
    chain = tmp_path / "everywhere.yaml"
    chain.write_text(text)
    (tmp_path / "schemas").symlink_to(Path(CHAIN).parent / "schemas")
    before = limited.snapshot()
    res = limited.rotate("dragonfly", "--confirm", "--chain", str(chain))
    assert res.code == 3, res.output
    assert "list deployments in all namespaces" in res.output, res.output
    assert "consumers.discovered (all namespaces)" in res.output
    assert "`rotate rbac dragonfly" in res.output and "ClusterRole" in res.output
    assert "nothing was changed" in res.output
    assert limited.snapshot() == before


@pytest.mark.parametrize(("index", "rule_index"), _rule_cases())
def test_one_rbac_rule_less_stops_in_preflight(limited: Limited, index: int,
                                               rule_index: int) -> None:
    obj = copy.deepcopy(limited.rbac[index])
    rule = obj["rules"].pop(rule_index)
    try:
        apply(limited.lab, [obj])
        ns = obj["metadata"].get("namespace")
        words = f"{rule['verbs'][0]} {rule['resources'][0]}" + (f" in {ns}" if ns else "")
        _stops_in_preflight(limited, words)
    finally:
        apply(limited.lab, [limited.rbac[index]])
        if rule["resources"] == ["leases"]:  # Leases rotate could not delete: they expire
            for lease in ("rotate-dragonfly", "rotate-provider-deployment-dragonfly-dragonfly"):
                limited.lab.kubectl("delete", "lease", lease, "-n", "rotate-system",
                                    "--ignore-not-found")


@pytest.mark.parametrize(("path", "capability"), generated_policy())
def test_one_policy_capability_less_stops_in_preflight(limited: Limited, path: str,
                                                       capability: str) -> None:
    lab = limited.lab
    policy = limited.policy_hcl
    stanza = policy[policy.index(f'path "{path}"'):]
    stanza = stanza[:stanza.index("}") + 1]
    caps = stanza[stanza.index("[") + 1:stanza.index("]")].split(", ")
    fewer = stanza.replace(", ".join(caps), ", ".join(c for c in caps if c != f'"{capability}"'))
    assert fewer != stanza
    try:
        bao(lab, "policy", "write", POLICY, "-", stdin=policy.replace(stanza, fewer))
        words = (f"{capability} on {path}" if path != "sys/capabilities-self"
                 else "update on sys/capabilities-self")
        _stops_in_preflight(limited, words)
    finally:
        bao(lab, "policy", "write", POLICY, "-", stdin=policy)
