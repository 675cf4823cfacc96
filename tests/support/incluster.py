"""Setting a lab up for rotate in the cluster, as docs/in-cluster.md tells an operator to,
each piece from the CLI:

- ``rotate rbac dragonfly --service-account rotate-system/rotate | kubectl apply -f -``;
- OpenBao's kubernetes auth (``bao auth enable kubernetes``, its config pointing at the lab's
  API server to review tokens), ``rotate vault-policy dragonfly | bao policy write``, and a
  role bound to that ServiceAccount;
- the chain file (``backend.auth.method: kubernetes``) as ConfigMap ``rotate-chain`` and its
  JSON Schemas as ConfigMap ``rotate-schemas``, the Config Center token as Secret
  ``rotate-config-center``.

Then ``examples/in-cluster/*.yaml`` run with only the addresses of OpenBao and the Config
Center changed (:func:`rendered`).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.support.labtools import Lab
from tests.support.paths import EXAMPLE_CHAIN, SHOP_DATA

BAO = str(Path(sys.executable).parent / "bao")
NS, SA = "rotate-system", "rotate"
Obj = dict[str, Any]


def load_yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def _private_file(directory: Path, name: str, text: str) -> str:
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return str(path)


def bao(lab: Lab, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([BAO, *args], env=lab.process_env, capture_output=True, text=True,
                          input=stdin, timeout=30)
    assert proc.returncode == 0, f"bao {args[:2]} failed: {proc.stderr}"
    return proc.stdout


def pipe(lab: Lab, producer: list[str], consumer: list[str]) -> str:
    """``rotate … | kubectl/bao …`` as an operator types it."""
    made = lab.rotate(*producer)
    assert made.code == 0, made.output
    proc = subprocess.run(consumer, env=lab.process_env, input=made.stdout, text=True,
                          capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def configure_openbao(lab: Lab, tmp: Path) -> None:
    """Kubernetes auth reviewing tokens through the lab API server, and role ``rotate``."""
    kubeconfig = json.loads(Path(lab.env["KUBECONFIG"]).read_text())
    server = kubeconfig["clusters"][0]["cluster"]["server"]
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    reviewer = next(u["user"]["token"] for u in kubeconfig["users"] if u["name"] == "lab-admin")
    ca_file = _private_file(tmp, "ca.crt", ca.decode())
    jwt_file = _private_file(tmp, "reviewer.jwt", reviewer)
    bao(lab, "auth", "enable", "kubernetes")
    bao(lab, "write", "auth/kubernetes/config", f"kubernetes_host={server}",
        f"kubernetes_ca_cert=@{ca_file}", f"token_reviewer_jwt=@{jwt_file}",
        "disable_local_ca_jwt=true")
    pipe(lab, ["vault-policy", "dragonfly"], [BAO, "policy", "write", "rotate-dragonfly", "-"])
    bao(lab, "write", f"auth/kubernetes/role/{SA}", f"bound_service_account_names={SA}",
        f"bound_service_account_namespaces={NS}", "token_policies=rotate-dragonfly",
        "token_ttl=30m")


def in_cluster_chain(max_age: str | None = None) -> str:
    """The lab's chain file with ``backend.auth`` switched to the ServiceAccount (and, with
    ``max_age``, that ``maxAge`` on credential ``dragonfly``)."""
    text = EXAMPLE_CHAIN.read_text()
    token_auth = "    method: token"
    assert token_auth in text
    line = next(ln for ln in text.splitlines() if ln.startswith(token_auth))
    text = text.replace(line, f"    method: kubernetes\n    role: {SA}")
    if max_age is not None:
        head = "\n  dragonfly:\n"
        assert text.count(head) == 1
        text = text.replace(head, f"{head}    maxAge: {max_age}\n")
    return text


def chain_configmap(max_age: str | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rotate-chain", "namespace": NS},
            "data": {"rotate.yaml": in_cluster_chain(max_age)}}


def set_up(lab: Lab, tmp: Path, *, watch: bool = False) -> None:
    """RBAC (with the watcher's when ``watch``), OpenBao's kubernetes auth, the chain,
    schemas and Config Center token."""
    pipe(lab, ["rbac", "dragonfly", "--service-account", f"{NS}/{SA}",
               *(["--watch"] if watch else [])], ["kubectl", "apply", "-f", "-"])
    configure_openbao(lab, tmp)
    lab.kubectl_apply({"apiVersion": "v1", "kind": "List", "items": [
        chain_configmap(),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "rotate-schemas", "namespace": NS},
         "data": {p.name: p.read_text() for p in (SHOP_DATA / "schemas").glob("*.json")}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "rotate-config-center", "namespace": NS},
         "stringData": {"token": lab.env["CONFIG_CENTER_TOKEN"]}}]})


def rendered(lab: Lab, manifest: Path) -> Obj:
    """An example Job, CronJob or Deployment with the lab's OpenBao and Config Center
    addresses."""
    obj: Obj = load_yaml(manifest)
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    container = spec["template"]["spec"]["containers"][0]
    lab_values = {"BAO_ADDR": lab.env["BAO_ADDR"],
                  "CONFIG_CENTER_URL": lab.env["CONFIG_CENTER_URL"]}
    for var in container["env"]:
        var["value"] = lab_values.get(var["name"], var.get("value"))
        if var["value"] is None:
            var.pop("value")
    return obj


def job_finished(lab: Lab, name: str) -> Obj | None:
    job: Obj = lab.kjson("get", "job", "-n", NS, name)
    types = {c["type"] for c in job.get("status", {}).get("conditions", [])
             if c["status"] == "True"}
    return job if types & {"Complete", "Failed"} else None
