"""The lab's API server (Store + ApiServer, in-process, HTTPS on 127.0.0.1) behind a real
kubeconfig with an admin and a restricted identity: what the KubeClient adapter and the Kube
contract tests talk to."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rotate_lab.cluster.api import kubeconfig, tls
from rotate_lab.cluster.api.apiserver import ApiServer, Identity
from rotate_lab.cluster.api.store import Store

from rotate.clients.kube import KubeClient


@dataclass
class Lab:
    store: Store
    api: ApiServer
    kubeconfig: Path
    admin_token: str
    restricted_token: str
    #: (namespace, pod) → the pod's log, what ``pods/log`` serves (a test writes it)
    logs: dict[tuple[str, str], bytes]

    def client(self, context: str | None = None) -> KubeClient:
        return KubeClient(str(self.kubeconfig), context)


def start_lab(tmp: Path, material: tls.TlsMaterial, port: int) -> Lab:
    store = Store()
    for ns in ("shop", "dragonfly"):
        store.create("Namespace", {"metadata": {"name": ns}})
    admin, restricted = "adm-" + secrets.token_hex(12), "rst-" + secrets.token_hex(12)

    def resolve(namespace: str, name: str, ref: str) -> tuple[str, int] | None:
        return ("127.0.0.1", port) if (namespace, name) == ("shop", "cart") else None

    logs: dict[tuple[str, str], bytes] = {}

    def read_log(namespace: str, pod: str, container: str | None) -> bytes:
        return logs.get((namespace, pod), b"")

    api = ApiServer(store, tls=material,
                    identities={admin: Identity.admin(), restricted: Identity.restricted()},
                    proxy=resolve, logs=read_log).start()
    path = kubeconfig.write(tmp / "kubeconfig", api.url, material.ca_pem, admin, restricted)
    return Lab(store, api, path, admin, restricted, logs)


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "shop:1"}]}}}}
