"""KubeClient discovers which External Secrets Operator version the API server serves
(``external-secrets.io/v1``, else ``v1beta1``) instead of assuming one: against the lab's API
server as it is (v1 and v1beta1) and a variant serving only v1beta1 (an ESO before 0.17)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rotate_lab.cluster.api import resources, tls

from rotate.clients.kube import KubeClient
from rotate.clients.seams import KubeEvent
from rotate.core.refs import ObjectRef
from tests.support.kube_apiserver import Lab, start_lab

ESO = "external-secrets.io"


@pytest.fixture(scope="module")
def material() -> tls.TlsMaterial:
    return tls.generate()


def _only_v1beta1(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds = tuple(dataclasses.replace(k, versions=("v1beta1",)) if k.group == ESO else k
                  for k in resources.KINDS)
    by_name: dict[str, resources.Kind] = {}
    for k in kinds:
        for alias in (k.kind, k.kind.lower(), k.plural, *k.short_names):
            by_name.setdefault(alias, k)
    monkeypatch.setattr(resources, "KINDS", kinds)
    monkeypatch.setattr(resources, "_BY_NAME", by_name)
    monkeypatch.setattr(resources, "_BY_PATH", {(k.group, v, k.plural): k
                                                for k in kinds for v in k.versions})


@pytest.fixture(params=["v1", "v1beta1"])
def lab(request: pytest.FixtureRequest, tmp_path: Path, material: tls.TlsMaterial,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Lab, str]]:
    if request.param == "v1beta1":
        _only_v1beta1(monkeypatch)
    lab = start_lab(tmp_path, material, port=9)
    try:
        yield lab, request.param
    finally:
        lab.api.stop()


def _external_secret(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"secretStoreRef": {"name": "openbao", "kind": "ClusterSecretStore"},
                     "target": {"name": name}, "refreshInterval": "1h",
                     "data": [{"secretKey": "password",
                               "remoteRef": {"key": "infra/dragonfly", "property": "password"}}]}}


def test_the_served_eso_version_is_used(lab: tuple[Lab, str]) -> None:
    server, version = lab
    kube: KubeClient = server.client()
    assert kube.api_version("ExternalSecret") == f"{ESO}/{version}"
    created = kube.create("ExternalSecret", "dragonfly", _external_secret("dragonfly-password"))
    assert created["apiVersion"] == f"{ESO}/{version}"
    kube.patch("ExternalSecret", "dragonfly", "dragonfly-password",
               {"metadata": {"annotations": {"force-sync": "1"}}})
    got = kube.get("ExternalSecret", "dragonfly", "dragonfly-password")
    assert got["metadata"]["annotations"]["force-sync"] == "1"
    assert [e["metadata"]["name"] for e in kube.list("ExternalSecret", "dragonfly")] == [
        "dragonfly-password"]
    kube.create_event(KubeEvent(ObjectRef("ExternalSecret", "dragonfly", "dragonfly-password"),
                                got["metadata"]["uid"], "Normal", "SyncRequested", "m (run r)",
                                "sync.trigger", "r"))
    event = kube.list("Event", "dragonfly")[0]
    assert event["involvedObject"]["apiVersion"] == f"{ESO}/{version}"
