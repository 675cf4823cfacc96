"""The lab API server's RBAC authorizer for ServiceAccount tokens: the rule semantics of
Kubernetes RBAC, against the store directly and through the real kubectl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rotate_lab.cluster.api.rbac import (
    RbacIdentity,
    ServiceAccountUser,
    name_from_field_selector,
    rule_matches,
)
from rotate_lab.cluster.api.store import Store

from tests.support.apiserver import ApiLab

KUBECTL = shutil.which("kubectl")
RBAC = "rbac.authorization.k8s.io/v1"
SA = ServiceAccountUser("ops", "rotate")


def role(kind: str, name: str, namespace: str | None, *rules: dict[str, Any]) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if namespace:
        md["namespace"] = namespace
    return {"apiVersion": RBAC, "kind": kind, "metadata": md, "rules": list(rules)}


def binding(kind: str, name: str, namespace: str | None, role_kind: str, role_name: str,
            subject: dict[str, Any] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if namespace:
        md["namespace"] = namespace
    return {"apiVersion": RBAC, "kind": kind, "metadata": md,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role_name},
            "subjects": [subject or {"kind": "ServiceAccount", "name": "rotate",
                                     "namespace": "ops"}]}


def rule(verbs: list[str], resources: list[str], groups: list[str] | None = None,
         names: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiGroups": groups if groups is not None else [""],
                           "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = names
    return out


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(("r", "request_", "expected"), [
    (rule(["get"], ["secrets"]), ("get", "", "secrets", "a"), True),
    (rule(["get"], ["secrets"]), ("list", "", "secrets", None), False),
    (rule(["*"], ["secrets"]), ("delete", "", "secrets", "a"), True),
    (rule(["get"], ["secrets"]), ("get", "apps", "secrets", "a"), False),
    (rule(["get"], ["deployments"], ["*"]), ("get", "apps", "deployments", "a"), True),
    (rule(["get"], ["services"]), ("get", "", "services/proxy", "a:http"), False),
    (rule(["get"], ["services/proxy"]), ("get", "", "services/proxy", "a:http"), True),
    (rule(["get"], ["*/scale"], ["apps"]), ("get", "apps", "deployments/scale", "a"), True),
    (rule(["get"], ["*/scale"], ["apps"]), ("get", "apps", "deployments", "a"), False),
    (rule(["get"], ["*"]), ("get", "", "pods/log", "p"), True),
    (rule(["get"], ["secrets"], names=["a"]), ("get", "", "secrets", "a"), True),
    (rule(["get"], ["secrets"], names=["a"]), ("get", "", "secrets", "b"), False),
    (rule(["create"], ["secrets"], names=["a"]), ("create", "", "secrets", None), False),
    (rule(["list"], ["secrets"], names=["a"]), ("list", "", "secrets", None), False),
])
def test_rule_matches(r: dict[str, Any], request_: tuple[str, str, str, str | None],
                      expected: bool) -> None:
    assert rule_matches(r, *request_) is expected


def test_name_from_field_selector() -> None:
    assert name_from_field_selector("metadata.name=cart") == "cart"
    assert name_from_field_selector("metadata.namespace=x,metadata.name==cart") == "cart"
    assert name_from_field_selector("metadata.name!=cart") is None
    assert name_from_field_selector(None) is None


# --------------------------------------------------------------------------- bindings


@pytest.fixture()
def store() -> Store:
    s = Store()
    s.load_manifests([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                      for n in ("ops", "shop", "other")])
    return s


def test_a_role_binding_grants_its_role_in_its_namespace_only(store: Store) -> None:
    me = RbacIdentity(store, SA)
    assert not me.allows("get", "", "secrets", "shop", "db")
    store.load_manifests([role("Role", "r", "shop", rule(["get"], ["secrets"], names=["db"])),
                          binding("RoleBinding", "b", "shop", "Role", "r")])
    assert me.allows("get", "", "secrets", "shop", "db")
    assert not me.allows("get", "", "secrets", "shop", "other")
    assert not me.allows("get", "", "secrets", "other", "db")
    assert not me.allows("get", "", "secrets", None, "db")
    assert me.reason("get", "", "secrets", "shop", "db") == (
        'RBAC: allowed by RoleBinding "b/shop" of Role "r" to ServiceAccount "rotate/ops"')
    store.delete("RoleBinding", "shop", "b")
    assert not me.allows("get", "", "secrets", "shop", "db")


def test_a_cluster_role_through_a_role_binding_is_namespaced(store: Store) -> None:
    me = RbacIdentity(store, SA)
    store.load_manifests([role("ClusterRole", "cr", None, rule(["get"], ["namespaces"]),
                               rule(["patch"], ["deployments"], ["apps"])),
                          binding("RoleBinding", "b", "shop", "ClusterRole", "cr")])
    assert me.allows("patch", "apps", "deployments", "shop", "web")
    assert not me.allows("patch", "apps", "deployments", "other", "web")
    assert not me.allows("get", "", "namespaces", None, "shop")  # cluster scope: not via RB
    store.load_manifests([binding("ClusterRoleBinding", "crb", None, "ClusterRole", "cr")])
    assert me.allows("get", "", "namespaces", None, "shop")
    assert me.allows("patch", "apps", "deployments", "other", "web")


@pytest.mark.parametrize("subject", [
    {"kind": "Group", "name": "system:serviceaccounts:ops"},
    {"kind": "Group", "name": "system:authenticated"},
    {"kind": "User", "name": "system:serviceaccount:ops:rotate"},
    {"kind": "ServiceAccount", "name": "rotate"},  # namespace defaults to the binding's
])
def test_subjects(store: Store, subject: dict[str, Any]) -> None:
    store.load_manifests([role("Role", "r", "ops", rule(["get"], ["leases"],
                                                        ["coordination.k8s.io"])),
                          binding("RoleBinding", "b", "ops", "Role", "r", subject)])
    assert RbacIdentity(store, SA).allows("get", "coordination.k8s.io", "leases", "ops", "l")
    other = ServiceAccountUser("shop", "rotate")
    granted_to_all = subject["name"] == "system:authenticated"
    assert RbacIdentity(store, other).allows("get", "coordination.k8s.io", "leases", "ops",
                                             "l") is granted_to_all


def test_self_access_reviews_are_open_and_missing_roles_grant_nothing(store: Store) -> None:
    me = RbacIdentity(store, SA)
    assert me.allows("create", "authorization.k8s.io", "selfsubjectaccessreviews")
    store.load_manifests([binding("ClusterRoleBinding", "crb", None, "ClusterRole", "gone"),
                          binding("RoleBinding", "b", "shop", "Role", "gone")])
    assert not me.allows("get", "", "secrets", "shop", "db")


# --------------------------------------------------------------------------- kubectl


def kubectl(lab: ApiLab, *args: str, token: str | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(lab.kubeconfig.parent)
    auth = ["--token", token] if token is not None else []
    return subprocess.run([KUBECTL, "--kubeconfig", str(lab.kubeconfig), *auth, *args],
                          capture_output=True, text=True, timeout=20, env=env, input=stdin)


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_a_service_account_token_is_authorised_by_rbac_objects(apiserver: ApiLab,
                                                                 tmp_path: Path) -> None:
    apiserver.store.load_manifests([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
        for n in ("rbac-sa", "rbac-app") if not _exists(apiserver.store, n)] + [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "rotate", "namespace": "rbac-sa"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "rbac-app"},
         "stringData": {"password": "pw"}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "other", "namespace": "rbac-app"}, "stringData": {"k": "v"}},
    ])
    made = kubectl(apiserver, "create", "token", "rotate", "-n", "rbac-sa")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()

    denied = kubectl(apiserver, "get", "secret", "db", "-n", "rbac-app", token=token)
    assert denied.returncode == 1
    assert ('User "system:serviceaccount:rbac-sa:rotate" cannot get resource "secrets"'
            in denied.stderr)

    manifests = [role("Role", "rotate", "rbac-app", rule(["get", "list", "watch"], ["secrets"],
                                                          names=["db"])),
                 binding("RoleBinding", "rotate", "rbac-app", "Role", "rotate",
                         {"kind": "ServiceAccount", "name": "rotate", "namespace": "rbac-sa"})]
    applied = kubectl(apiserver, "apply", "-f", "-",
                      stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
    assert applied.returncode == 0, applied.stderr
    assert "role.rbac.authorization.k8s.io/rotate created" in applied.stdout

    got = kubectl(apiserver, "get", "secret", "db", "-n", "rbac-app", "-o", "name", token=token)
    assert (got.returncode, got.stdout.strip()) == (0, "secret/db"), got.stderr
    assert kubectl(apiserver, "get", "secret", "other", "-n", "rbac-app",
                   token=token).returncode == 1
    # a list is refused by a resourceNames rule unless the field selector names the object
    assert kubectl(apiserver, "get", "secrets", "-n", "rbac-app", token=token).returncode == 1
    selected = kubectl(apiserver, "get", "secrets", "-n", "rbac-app", "-o", "name",
                       "--field-selector", "metadata.name=db", token=token)
    assert (selected.returncode, selected.stdout.strip()) == (0, "secret/db"), selected.stderr
    # SelfSubjectAccessReview answers with the same authorizer, names included
    can = kubectl(apiserver, "auth", "can-i", "get", "secret/db", "-n", "rbac-app", token=token)
    assert (can.returncode, can.stdout.strip()) == (0, "yes")
    cannot = kubectl(apiserver, "auth", "can-i", "get", "secret/other", "-n", "rbac-app",
                     token=token)
    assert (cannot.returncode, cannot.stdout.strip()) == (1, "no")
    listed = kubectl(apiserver, "get", "roles,rolebindings", "-n", "rbac-app", "-o", "name")
    assert listed.stdout.split() == ["role.rbac.authorization.k8s.io/rotate",
                                     "rolebinding.rbac.authorization.k8s.io/rotate"]

    assert kubectl(apiserver, "delete", "rolebinding", "rotate", "-n", "rbac-app").returncode == 0
    assert kubectl(apiserver, "get", "secret", "db", "-n", "rbac-app",
                   token=token).returncode == 1
    # a deleted ServiceAccount's token is no identity at all
    assert kubectl(apiserver, "delete", "sa", "rotate", "-n", "rbac-sa").returncode == 0
    gone = kubectl(apiserver, "get", "secret", "db", "-n", "rbac-app", token=token)
    assert gone.returncode == 1 and "Unauthorized" in gone.stderr


def _exists(store: Store, namespace: str) -> bool:
    try:
        store.get("Namespace", None, namespace)
    except Exception:
        return False
    return True


def test_the_list_forbidden_fault_withholds_listing_workloads_where_it_names() -> None:
    """``list-forbidden NS``: listing workloads there is refused to requests and access
    reviews alike; elsewhere, and every other verb, is the identity's own answer; ``*``
    withholds the cluster-wide lists too."""
    from rotate_lab.cluster.api.auth import Identity, Withheld, access_review

    denied: set[str | None] = {"reports"}
    who = Withheld(Identity.admin(), lambda ns: ns in denied)
    assert not who.allows("list", "apps", "deployments", "reports")
    assert not who.allows("watch", "external-secrets.io", "externalsecrets", "reports")
    assert who.allows("list", "apps", "deployments", "shop")
    assert who.allows("patch", "apps", "deployments", "reports", "report-env")
    assert who.allows("list", "apps", "deployments", None)
    review = access_review(who, {"spec": {"resourceAttributes": {
        "verb": "list", "group": "apps", "resource": "deployments", "namespace": "reports"}}})
    assert review["status"]["allowed"] is False
    denied.add(None)
    assert not who.allows("list", "apps", "daemonsets", None)
