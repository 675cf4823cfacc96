"""The field traps chain.md names, set up on the lab with kubectl, each caught by preflight.

Every case: `rotate dragonfly --confirm` exits 3 naming the trap and what to do, and nothing
changed (OpenBao's version, the Secret, every revision). Then the trap is removed again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.labtools import Lab

pytestmark = pytest.mark.lab


def snapshot(lab: Lab) -> tuple[int, str, dict[str, int]]:
    secret = lab.kjson("get", "secret", "-n", "dragonfly", "dragonfly-password-secret")
    return lab.bao_version(), secret["metadata"]["resourceVersion"], lab.revisions()


def patch(lab: Lab, kind: str, ns: str, name: str, body: object, kind_of: str = "merge") -> None:
    lab.kubectl("patch", kind, "-n", ns, name, "--type", kind_of, "-p", json.dumps(body))


def _created_once(lab: Lab) -> Callable[[], None]:
    patch(lab, "externalsecret", "dragonfly", "dragonfly-password",
          {"spec": {"refreshPolicy": "CreatedOnce"}})
    return lambda: patch(lab, "externalsecret", "dragonfly", "dragonfly-password",
                         {"spec": {"refreshPolicy": "Periodic"}})


def _interval_zero(lab: Lab) -> Callable[[], None]:
    patch(lab, "externalsecret", "dragonfly", "dragonfly-password",
          {"spec": {"refreshInterval": "0"}})
    return lambda: patch(lab, "externalsecret", "dragonfly", "dragonfly-password",
                         {"spec": {"refreshInterval": "1h"}})


def _paused_provider(lab: Lab) -> Callable[[], None]:
    patch(lab, "deployment", "dragonfly", "dragonfly", {"spec": {"paused": True}})
    return lambda: patch(lab, "deployment", "dragonfly", "dragonfly", {"spec": {"paused": False}})


def _operator_owned(lab: Lab) -> Callable[[], None]:
    lab.kubectl("create", "configmap", "-n", "dragonfly", "dragonfly-operator")
    uid = lab.kjson("get", "configmap", "-n", "dragonfly", "dragonfly-operator")["metadata"]["uid"]
    patch(lab, "deployment", "dragonfly", "dragonfly", {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "dragonfly-operator", "uid": uid,
         "controller": True}]}})

    def undo() -> None:
        patch(lab, "deployment", "dragonfly", "dragonfly",
              [{"op": "remove", "path": "/metadata/ownerReferences"}], "json")
        lab.kubectl("delete", "configmap", "-n", "dragonfly", "dragonfly-operator")
    return undo


def _reloader_on_consumer(lab: Lab) -> Callable[[], None]:
    key = "secret.reloader.stakater.com/reload"
    patch(lab, "deployment", "shop", "order",
          {"metadata": {"annotations": {key: "dragonfly-password-secret"}}})
    return lambda: patch(lab, "deployment", "shop", "order",
                         {"metadata": {"annotations": {key: None}}})


def _vso_on_consumer(lab: Lab) -> Callable[[], None]:
    manifest = {
        "apiVersion": "secrets.hashicorp.com/v1beta1", "kind": "VaultStaticSecret",
        "metadata": {"namespace": "shop", "name": "order-creds"},
        "spec": {"mount": "secret", "type": "kv-v2", "path": "shop/order",
                 "destination": {"name": "order-creds", "create": True},
                 "rolloutRestartTargets": [{"kind": "Deployment", "name": "order"}]}}
    lab.kubectl_apply(manifest)
    return lambda: lab.kubectl("delete", "vaultstaticsecret", "-n", "shop", "order-creds")


CASES: list[tuple[str, Callable[[Lab], Callable[[], None]], tuple[str, ...]]] = [
    ("refresh-created-once", _created_once, ("dragonfly/dragonfly-password", "Periodic")),
    ("refresh-interval-zero", _interval_zero, ("refreshInterval",)),
    ("paused-deployment", _paused_provider, ("deployment/dragonfly/dragonfly", "unpause")),
    ("operator-owned", _operator_owned, ("ConfigMap/dragonfly-operator",)),
    ("other-reloader", _reloader_on_consumer, ("deployment/shop/order",)),
    ("other-reloader", _vso_on_consumer, ("deployment/shop/order", "Vault Secrets Operator")),
]


@pytest.fixture
def trap_lab(lab: Lab) -> Iterator[Lab]:
    before = snapshot(lab)
    yield lab
    assert snapshot(lab)[0] == before[0], "a trapped run must not write to OpenBao"


@pytest.mark.parametrize(("trap", "arm", "words"), CASES,
                         ids=[c[1].__name__.strip("_") for c in CASES])
def test_preflight_catches_the_trap_and_changes_nothing(
    trap_lab: Lab, trap: str, arm: Callable[[Lab], Callable[[], None]], words: tuple[str, ...]
) -> None:
    lab = trap_lab
    undo = arm(lab)
    try:
        before = snapshot(lab)
        res = lab.rotate("dragonfly", "--confirm", "-o", "json")
        assert res.code == 3, res.output
        assert trap in res.stderr
        for word in words:
            assert word in res.stderr, (word, res.stderr)
        assert snapshot(lab) == before
    finally:
        undo()
    assert lab.rotate("dragonfly").code == 0, "removing the trap makes the plan pass again"


def test_a_consumer_without_readiness_probe_is_refused(lab: Lab, tmp_path: Path) -> None:
    before = snapshot(lab)
    probe = lab.kjson("get", "deployment", "-n", "shop", "cart")["spec"]["template"]["spec"][
        "containers"][0]["readinessProbe"]
    patch(lab, "deployment", "shop", "cart",
          [{"op": "remove", "path": "/spec/template/spec/containers/0/readinessProbe"}], "json")
    try:
        res = lab.rotate("dragonfly", "--confirm")
        assert res.code == 3, res.output
        assert "no-readiness-probe" in res.output and "deployment/shop/cart" in res.output
        assert lab.bao_version() == before[0]
    finally:
        patch(lab, "deployment", "shop", "cart", [{
            "op": "add", "path": "/spec/template/spec/containers/0/readinessProbe",
            "value": probe}], "json")
