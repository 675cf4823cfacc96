"""rotate/engine/access.py: the one permission list, and the checks built on it."""

from __future__ import annotations

import pytest

from rotate.chain.loader import load_chain
from rotate.core.errors import ForbiddenError, NotFoundError
from rotate.engine.access import (
    Permission,
    check_permissions,
    check_vault_capabilities,
    permissions_needed,
)
from rotate.engine.lock import lease_name
from tests.fakes import FakeKube, FakeVault
from tests.support.paths import EXAMPLE_CHAIN

CHAIN = EXAMPLE_CHAIN


def test_named_where_rbac_can_restrict_and_only_there() -> None:
    chain = load_chain(CHAIN)
    perms = permissions_needed(chain, chain.credential("dragonfly"))
    assert len(perms) == len(set(perms))
    assert Permission("create", "Lease", "rotate-system") in perms
    assert Permission("update", "Lease", "rotate-system",
                      name=lease_name("dragonfly")) in perms
    assert Permission("get", "Namespace", None, name="rotate-system") in perms
    # the run journals: a ConfigMap per run in the lock namespace, named by its run id
    assert {p.verb for p in perms if p.kind == "ConfigMap" and p.namespace == "rotate-system"
            and p.name is None} == {"create", "get", "list", "update", "delete"}
    assert Permission("get", "Service", "shop", "proxy", name="cart:http") in perms
    assert not [p for p in perms if p.verb in ("create", "list") and p.name]
    # named watches, the kube adapter sending a metadata.name field selector for them; and
    # the consumers' Pods, listed and watched in their namespace (a prepared rollout's new
    # pods, started before the provider switches), never named
    assert {p.kind for p in perms if p.verb == "watch" and p.name} == {"ExternalSecret",
                                                                       "Deployment"}
    pods = {(p.verb, p.namespace, p.name) for p in perms
            if p.kind == "Pod" and p.subresource is None}
    # and in reports (consumers.namespaces) every Pod verb a discovered reader's roll needs:
    # its name is known only at run time
    assert pods == {("list", "shop", None), ("watch", "shop", None),
                    *((v, "reports", None) for v in ("get", "list", "watch", "delete"))}


def test_port_forward_is_needed_from_outside_the_cluster_only() -> None:
    """A provider rotate logs in to (dragonfly's probe) is port-forwarded to from outside the
    cluster (rotate.chain.routes): `rotate rbac` (no environment) grants it, preflight from
    a laptop checks it, and neither does inside the cluster or with the address given."""
    chain = load_chain(CHAIN)
    cred = chain.credential("dragonfly")
    forward = {Permission(v, "Pod", "dragonfly", "portforward") for v in ("create", "get")}
    assert forward <= set(permissions_needed(chain, cred))
    assert forward <= set(permissions_needed(chain, cred, {}))
    inside = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert not forward & set(permissions_needed(chain, cred, inside))
    direct = {"ROTATE_PROVIDER_ROUTE": "direct"}
    assert not forward & set(permissions_needed(chain, cred, direct))


class NamedKube(FakeKube):
    def __init__(self, refused: set[tuple[str, str, str | None]]) -> None:
        super().__init__()
        self.refused = refused

    def can_i(self, verb: str, kind: str, namespace: str | None, *,
              subresource: str | None = None, name: str | None = None) -> bool:
        if name is None and any(v == verb and k == kind for v, k, _ in self.refused):
            return False  # RBAC has no deny: refused on one object, not allowed on all
        return (verb, kind, name) not in self.refused


def test_check_permissions_asks_once_per_group_when_allowed_on_every_object() -> None:
    chain = load_chain(CHAIN)
    perms = permissions_needed(chain, chain.credential("dragonfly"))
    asked: list[tuple[str, str, str | None]] = []

    class Counting(NamedKube):
        def can_i(self, verb: str, kind: str, namespace: str | None, *,
                  subresource: str | None = None, name: str | None = None) -> bool:
            asked.append((verb, kind, name))
            return True

    assert check_permissions(Counting(set()), perms) == []
    assert not [a for a in asked if a[2] is not None]
    assert len(asked) < len(perms)


def test_check_permissions_names_the_objects() -> None:
    chain = load_chain(CHAIN)
    perms = permissions_needed(chain, chain.credential("dragonfly"))
    kube = NamedKube({("patch", "Deployment", "cart"), ("patch", "Deployment", "user"),
                      ("create", "Lease", None)})
    assert check_permissions(kube, perms) == ["create leases in rotate-system",
                                              "patch deployments in shop (cart, user)",
                                              "patch deployments in reports"]


def test_vault_capabilities_come_from_the_grant_list() -> None:
    chain = load_chain(CHAIN)
    cred = chain.credential("dragonfly")
    vault = FakeVault()
    assert check_vault_capabilities(vault, chain, cred).startswith("create/read/update on ")
    vault.capability_map["secret/metadata/infra/dragonfly"] = ["read", "update"]
    with pytest.raises(NotFoundError) as exc:
        check_vault_capabilities(vault, chain, cred)
    assert "missing create on secret/metadata/infra/dragonfly" in exc.value.message

    def refuse(paths: object) -> dict[str, list[str]]:
        raise ForbiddenError("vault", "check capabilities", "not allowed", status=403)

    vault.capabilities = refuse  # type: ignore[method-assign]
    with pytest.raises(NotFoundError) as exc:
        check_vault_capabilities(vault, chain, cred)
    assert "update on sys/capabilities-self" in exc.value.message
