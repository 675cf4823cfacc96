"""The lab's "cluster" process: API server, controllers, ESO, Reloader and kubelet as threads.

``python -m rotate_lab.cluster --dir DIR --profile fast|realistic --net-octet N [--reloader]``

Started detached by ``rotate lab up``, which first writes ``DIR/cluster.json`` (mode 0600):
the OpenBao and Config Center addresses, the ESO token, the services' machine tokens and the
API tokens — secrets stay out of argv.  The TLS material is in ``DIR/tls/``.

At start it seeds the store with every manifest of the package's ``ecommerce/*.yaml`` except the
chain file, plus what only the lab can know: Endpoints for the two servers running outside
the "cluster" (``openbao/openbao``, ``platform/config-center``, the real-cluster pattern for
an external service), Secret ``<ns>/openbao-token`` (ESO's read-only token) in every
namespace with a SecretStore, and one
Secret ``shop/<svc>-config-token`` per service.  Then it writes the API server's port to
``DIR/apiserver.port`` (atomically), which is what ``up`` waits for.

SIGTERM/SIGINT: stop the kubelet first (it kills every pod and waits), then the controllers,
then the API server; exit 0.  Pods are children of this process, so stopping it cleanly is
what guarantees no pod outlives the lab.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from rotate_lab.cluster.context import LabContext, Network, Profile, Resolver
from rotate_lab.faults import Faults
from rotate_lab.shop import files as shopfiles

log = logging.getLogger("rotate_lab.cluster")
Obj = dict[str, Any]

#: the servers outside the "cluster", reached through selector-less Services
EXTERNAL = {"openbao": ("openbao", "openbao", 8200), "config_center": ("platform",
                                                                          "config-center", 80)}


class Part(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


def manifest_docs(directory: Path) -> list[Obj]:
    """Every YAML document of ``directory/*.yaml`` except the chain file, in file order."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe")
    docs: list[Obj] = []
    for path in sorted(directory.glob("*.yaml")):
        if path.name == shopfiles.CHAIN_FILE_NAME:
            continue
        docs.extend(d for d in yaml.load_all(path.read_text()) if isinstance(d, dict))
    return docs


#: the optional parts ``rotate lab up --with`` starts (``ecommerce/extras/<name>.yaml``)
EXTRAS = ("bugsink", "mariadb")


def extra_docs(directory: Path, name: str) -> list[Obj]:
    """The manifests of an optional part, loaded only when it was asked for."""
    from ruamel.yaml import YAML

    text = (directory / "extras" / f"{name}.yaml").read_text()
    return [d for d in YAML(typ="safe").load_all(text) if isinstance(d, dict)]


def _secret(ns: str, name: str, data: dict[str, str], labels: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"namespace": ns, "name": name, "labels": labels},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def lab_objects(cfg: Obj, manifests: list[Obj]) -> list[Obj]:
    """Objects only the lab can know (addresses and tokens of this run)."""
    labels = {"app.kubernetes.io/managed-by": "rotate-lab"}
    have = {(d.get("kind"), (d.get("metadata") or {}).get("namespace"),
             (d.get("metadata") or {}).get("name")) for d in manifests}
    out: list[Obj] = []
    urls = {"openbao": cfg["openbao"]["addr"], "config_center": cfg["config_center"]["url"]}
    for part, (ns, name, port) in EXTERNAL.items():
        real_port = int(urls[part].rsplit(":", 1)[1].split("/")[0])
        if ("Namespace", None, ns) not in have:
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        svc = next((d for d in manifests if d.get("kind") == "Service"
                    and d["metadata"].get("namespace") == ns and d["metadata"]["name"] == name),
                   None)
        if svc is None:
            svc = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"namespace": ns, "name": name, "labels": labels},
                   "spec": {"ports": [{"name": "http", "port": port, "protocol": "TCP"}]}}
            out.append(svc)
        ports = [{k: v for k, v in (("name", p.get("name")), ("port", real_port),
                                    ("protocol", "TCP")) if v is not None}
                 for p in svc["spec"].get("ports") or []]
        out.append({"apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"namespace": ns, "name": name, "labels": labels},
                    "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": ports}]})
    # ESO's read-only token, in every namespace with a SecretStore (dragonfly, db).
    for ns in sorted({str(d["metadata"].get("namespace")) for d in manifests
                      if d.get("kind") == "SecretStore"} | {"dragonfly"}):
        out.append(_secret(ns, "openbao-token", {"token": cfg["openbao"]["eso_token"]},
                           labels))
    for svc_name, token in sorted(cfg["machine_tokens"].items()):
        out.append(_secret("shop", f"{svc_name}-config-token", {"token": token}, labels))
    return out


def build_controllers(ctx: LabContext, reloader: bool) -> tuple[list[Part], Any]:
    """The controllers, in start order, and the ServiceController (the proxy's resolver)."""
    from rotate_lab.cluster.controllers.cronjob import CronJobController
    from rotate_lab.cluster.controllers.daemonset import DaemonSetController
    from rotate_lab.cluster.controllers.deployment import DeploymentController
    from rotate_lab.cluster.controllers.eso import ExternalSecretController
    from rotate_lab.cluster.controllers.job import JobController
    from rotate_lab.cluster.controllers.replicaset import ReplicaSetController
    from rotate_lab.cluster.controllers.services import ServiceController
    from rotate_lab.cluster.controllers.statefulset import StatefulSetController

    services = ServiceController(ctx)
    parts: list[Part] = [services, ExternalSecretController(ctx), DeploymentController(ctx),
                         ReplicaSetController(ctx), StatefulSetController(ctx),
                         DaemonSetController(ctx), JobController(ctx),
                         CronJobController(ctx)]
    if reloader:
        from rotate_lab.cluster.controllers.reloader import ReloaderController

        parts.append(ReloaderController(ctx))
    return parts, services


def pod_log_reader(kubelet: Any) -> Any:
    """``kubectl logs``: the kubelet keeps one output file per pod (all its containers)."""

    def read(namespace: str, pod: str, _container: str | None) -> bytes:
        try:
            return bytes(kubelet.log_file(namespace, pod).read_bytes())
        except FileNotFoundError:
            return b""  # not started yet: an empty log, as for a pod still pulling

    return read


def journal_unreachable(faults: Faults) -> Any:
    """The API server's drop rule while ``journal-unreachable`` is on: every request for a
    ConfigMap of rotate's run journals (``rotate-run-*``), and their lists."""
    def drop(path: str) -> bool:
        if "/configmaps" not in path or not faults.active("journal-unreachable"):
            return False
        name = path.rstrip("/").rsplit("/configmaps", 1)[1].strip("/")
        return name == "" or name.startswith("rotate-run-")
    return drop


def list_forbidden(faults: Faults) -> Any:
    """The namespaces where ``list-forbidden`` withholds listing workloads: its targets
    (``*``: every namespace and the cluster-wide lists; no target: everywhere)."""
    def denied(namespace: str | None) -> bool:
        if not faults.active("list-forbidden"):
            return False
        return (faults.active("list-forbidden", "*")
                or (namespace is not None and faults.active("list-forbidden", namespace)))
    return denied


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run(lab_dir: Path, profile: str, octet: int, reloader: bool,
        extras: tuple[str, ...] = ()) -> int:
    from rotate_lab.cluster.api.apiserver import ApiServer
    from rotate_lab.cluster.api.auth import Identity
    from rotate_lab.cluster.api.store import Store
    from rotate_lab.cluster.api.tls import TlsMaterial
    from rotate_lab.cluster.api.tokens import TokenIssuer
    from rotate_lab.cluster.context import ApiEndpoint
    from rotate_lab.cluster.node.kubelet import Kubelet

    cfg: Obj = json.loads((lab_dir / "cluster.json").read_text())
    store = Store()
    ctx = LabContext(store=store, dir=lab_dir, profile=Profile.named(profile),
                     faults=Faults(lab_dir / "faults.json"), network=Network(octet),
                     resolver=Resolver(lab_dir / "hosts"),
                     runtime_dir=Path(cfg["runtime_dir"]) if cfg.get("runtime_dir") else None)
    ctx.endpoints.update(openbao=cfg["openbao"]["addr"], config_center=cfg["config_center"]["url"])

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        ctx.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    docs = manifest_docs(shopfiles.shop_dir(lab_dir))
    for extra in extras:  # optional parts: ecommerce/extras/<name>.yaml
        docs += extra_docs(shopfiles.shop_dir(lab_dir), extra)
    store.load_manifests(docs + lab_objects(cfg, docs))
    log.info("seeded %d manifest objects", len(docs))

    controllers, services = build_controllers(ctx, reloader)
    kubelet = Kubelet(ctx)
    server: Any = None
    started: list[Part] = []
    try:
        # Bound (not yet serving) before any pod starts: the kubelet hands pods the API
        # server's address and tokens its issuer signs (rotate_lab.cluster.node.incluster).
        tls = TlsMaterial.read(Path(cfg["tls_dir"]))
        ctx.tokens = TokenIssuer()
        server = ApiServer(
            store, host="127.0.0.1", port=0, tls=tls,
            identities={cfg["tokens"]["admin"]: Identity.admin(),
                        cfg["tokens"]["restricted"]: Identity.restricted()},
            proxy=services.proxy_target, logs=pod_log_reader(kubelet), tokens=ctx.tokens,
            forwards_dropped=lambda: ctx.faults.active("portforward-drop"),
            unreachable=journal_unreachable(ctx.faults),
            withheld=list_forbidden(ctx.faults))
        ctx.api = ApiEndpoint.from_url(str(server.url), tls.ca_pem)
        for part in [*controllers, kubelet]:
            part.start()
            started.append(part)
        server.start()
        port = str(server.url).rsplit(":", 1)[1].strip("/")
        write_atomic(lab_dir / "apiserver.port", port + "\n")
        log.info("api server listening on %s (profile %s, 127.%d.0.0/16, reloader %s)",
                 server.url, profile, octet, "on" if reloader else "off")
        ctx.stop.wait()
    finally:
        ctx.stop.set()
        # Kubelet first: its pods are our children and must be gone before we exit.
        for part in reversed(started):
            _quietly(part.stop, type(part).__name__)
        if server is not None:
            _quietly(server.stop, "ApiServer")
    log.info("stopped")
    return 0


def _quietly(fn: Any, what: str) -> None:
    try:
        fn()
    except Exception:
        log.exception("stopping %s failed", what)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rotate_lab.cluster")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--profile", default="fast", choices=("fast", "realistic"))
    ap.add_argument("--net-octet", required=True, type=int)
    ap.add_argument("--reloader", action="store_true")
    ap.add_argument("--with", dest="extras", action="append", default=[],
                    choices=EXTRAS)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # httpx logs every request URL at INFO: noise in cluster.log (ESO polls OpenBao).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    threading.current_thread().name = "lab-cluster"
    if not 1 <= args.net_octet <= 254:
        ap.error("--net-octet must be 1..254")
    return run(args.dir.resolve(), args.profile, args.net_octet, args.reloader,
               tuple(args.extras))
