"""``rotate lab up --services N``: a shop whose Dragonfly credential has N consumers.

cart, order and user always consume ``dragonfly``; ``N - 3`` more services
``consumer-004 … consumer-NNN`` are generated, each a copy of cart (same image, schema shape,
bindings, readiness probe, its own machine token).  N is 3 … 100 — 100 because that is what
a 2-core machine is sized for (see docs/performance.md for the memory each pod costs).

Everything is generated *consistently* into ``DIR/shop/``: a copy of the packaged
``ecommerce/`` tree plus ``45-generated.yaml`` (Deployments and Services), one schema per
generated service (cart's, retitled) and the chain file ``rotate.yaml`` with the generated
services appended to ``services:`` (the last section of the packaged chain file).  The lab
then reads that directory (:func:`rotate_lab.shop.files.shop_dir`) and ``DIR/env`` points
``ROTATE_CHAIN`` at its chain file.  Without ``--services`` the directory is removed, so a
lab directory never mixes two shapes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rotate.core.errors import UsageError

#: the services that consume dragonfly in the packaged shop
BASE_CONSUMERS = ("cart", "order", "user")
MIN_SERVICES = len(BASE_CONSUMERS)
MAX_SERVICES = 100
GENERATED_DIR = "shop"
GENERATED_MANIFEST = "45-generated.yaml"
TEMPLATE = "cart"


def check_count(services: int) -> int:
    """``services`` if within range, else a UsageError (exit 2) saying the range and why."""
    if not MIN_SERVICES <= services <= MAX_SERVICES:
        raise UsageError(
            f"--services {services} is out of range: {MIN_SERVICES} to {MAX_SERVICES} "
            f"consumers of dragonfly ({', '.join(BASE_CONSUMERS)} always are; the rest are "
            f"generated; {MAX_SERVICES} is what this machine is sized for)")
    return services


def generated_names(services: int) -> list[str]:
    """The generated consumers for a shop of ``services`` dragonfly consumers."""
    return [f"consumer-{i:03d}" for i in range(MIN_SERVICES + 1, services + 1)]


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name, "app.kubernetes.io/part-of": "shop"}
    container = {
        "name": name, "image": "ghcr.io/example/shop-service:1.0",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "CONFIG_CENTER_URL",
                 "value": "http://config-center.platform.svc.cluster.local"},
                {"name": "CONFIG_CENTER_TOKEN", "valueFrom": {"secretKeyRef": {
                    "name": f"{name}-config-token", "key": "token"}}}],
        # lighter than cart's (1 s, 1 failure): 100 pods probed by one kubelet process on
        # 2 cores time out under load and flap; a rollout still sees Ready at the first probe
        # "started" (what a prepared rollout waits for) means listening, not just running
        "startupProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                         "periodSeconds": 1, "failureThreshold": 30, "timeoutSeconds": 5},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"},
                           "periodSeconds": 2, "failureThreshold": 3, "timeoutSeconds": 5},
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container]}}}}


def _service(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "shop",
                         "labels": {"app": name, "app.kubernetes.io/part-of": "shop"}},
            "spec": {"type": "ClusterIP", "selector": {"app": name},
                     "ports": [{"name": "http", "port": 80, "targetPort": "http",
                                "protocol": "TCP"}]}}


def _chain_entry(name: str) -> str:
    dragonfly = "{service: {namespace: dragonfly, name: dragonfly, port: 6379, part: %s}}"
    secret = ("{secretKey: {namespace: dragonfly, name: dragonfly-password-secret, "
              "key: password}}")
    url = '{template: "redis://:{/dragonfly/password}@{/dragonfly/host}:{/dragonfly/port}/0"}'
    return "\n".join([
        f"  {name}:",
        "    namespace: shop",
        f"    workload: {{kind: Deployment, name: {name}}}",
        f"    schema: schemas/{name}.schema.json",
        "    configKey: bootstrap",
        "    values:",
        f"      /service/name: {{literal: {name}}}",
        f"      /dragonfly/host: {dragonfly % 'host'}",
        f"      /dragonfly/port: {dragonfly % 'port'}",
        f"      /dragonfly/password: {secret}",
        f"      /dragonfly/url: {url}",
        "    token:",
        f"      secret: {{name: {name}-config-token, key: token}}",
        "    readyz:",
        f"      service: {name}",
        "      port: http",
        "      path: /readyz",
    ]) + "\n"


def generate(lab_dir: Path, packaged: Path, services: int | None) -> list[str]:
    """Write ``lab_dir/shop/`` for ``services`` consumers (remove it for None); the
    generated service names."""
    target = lab_dir / GENERATED_DIR
    if target.exists():
        shutil.rmtree(target)
    if services is None:
        return []
    names = generated_names(check_count(services))
    shutil.copytree(packaged, target)
    template = json.loads((packaged / "schemas" / f"{TEMPLATE}.schema.json").read_text())
    for name in names:
        schema = json.loads(json.dumps(template).replace(
            f'"const": "{TEMPLATE}"', f'"const": "{name}"'))
        schema.update({"$id": str(template.get("$id", "")).replace(TEMPLATE, name),
                       "title": f"{name} bootstrap document (generated from cart's)",
                       "description": f"Config Center key `bootstrap` of the generated shop "
                                      f"service {name}."})
        (target / "schemas" / f"{name}.schema.json").write_text(json.dumps(schema, indent=2))
    docs = [d for name in names for d in (_deployment(name), _service(name))]
    (target / GENERATED_MANIFEST).write_text(
        f"# {len(names)} generated consumers of dragonfly (rotate lab up --services "
        f"{services})\n" + "".join(f"---\n{json.dumps(d)}\n" for d in docs))
    chain = target / "rotate.yaml"
    text = chain.read_text()
    if not text.endswith("\n"):
        text += "\n"
    chain.write_text(text + f"  # generated by rotate lab up --services {services}\n"
                     + "".join(_chain_entry(n) for n in names))
    return names
