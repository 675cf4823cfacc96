"""The in-cluster Job of examples/in-cluster/ runs for real in the lab (issue 9 item 3).

Set up as docs/in-cluster.md tells an operator to, each piece from the CLI:

- ``rotate rbac dragonfly --service-account rotate-system/rotate | kubectl apply -f -``;
- OpenBao's kubernetes auth (``bao auth enable kubernetes``, its config pointing at the lab's
  API server to review tokens), ``rotate vault-policy dragonfly | bao policy write``, and a
  role bound to that ServiceAccount;
- the chain file (``backend.auth.method: kubernetes``) as ConfigMap ``rotate-chain`` and its
  JSON Schemas as ConfigMap ``rotate-schemas``, the
  Config Center token as Secret ``rotate-config-center``, the journal's PersistentVolumeClaim;
- ``examples/in-cluster/job.yaml``, rendered for the lab (only the addresses of OpenBao and the
  Config Center change).

The lab's Job controller creates the pod, its kubelet runs the ``rotate`` console script as
the pod's process with the ServiceAccount token mounted and ``KUBERNETES_SERVICE_HOST``/
``PORT`` set: rotate finds the cluster in-cluster and logs in to OpenBao with that token.
No kubeconfig, no OpenBao token reaches the pod.  The one full rotation of this module.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rotate.clients.cluster_journals import head_name
from tests.support.incluster import NS, SA, install_prerequisites, manifest, with_lab_addresses
from tests.support.labtools import CONSUMERS, Lab, scan
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

JOB = "rotate-dragonfly"


def rendered_job(lab: Lab, examples: Path) -> dict[str, Any]:
    job: dict[str, Any] = manifest(examples / "job.yaml")
    with_lab_addresses(lab, job["spec"]["template"]["spec"]["containers"][0])
    return job


def finished(lab: Lab) -> dict[str, Any] | None:
    job: dict[str, Any] = lab.kjson("get", "job", "-n", NS, JOB)
    types = {c["type"] for c in job.get("status", {}).get("conditions", [])
             if c["status"] == "True"}
    return job if types & {"Complete", "Failed"} else None


def test_the_example_job_rotates_dragonfly_in_the_cluster(lab: Lab, tmp_path: Path,
                                                           repo_root: Path) -> None:
    examples = repo_root / "examples" / "in-cluster"
    install_prerequisites(lab, tmp_path)
    before = lab.bao_version()

    lab.kubectl_apply(rendered_job(lab, examples))
    job = eventually(lambda: finished(lab), 150, "the Job to finish")
    pods = lab.kjson("get", "pods", "-n", NS, "-l", f"batch.kubernetes.io/job-name={JOB}")
    logs = lab.kubectl("logs", "-n", NS, f"job/{JOB}")
    assert job["status"].get("succeeded") == 1, (job["status"], logs)
    # kubectl's own watch agrees, and its table says so
    lab.kubectl("wait", "-n", NS, "--for=condition=complete", f"job/{JOB}", "--timeout=20s")
    table = lab.kubectl("get", "job", "-n", NS, JOB)
    assert "Complete" in table and "1/1" in table, table

    assert [p["status"]["phase"] for p in pods["items"]] == ["Succeeded"]
    pod_spec = pods["items"][0]["spec"]
    assert pod_spec["serviceAccountName"] == SA and pod_spec["restartPolicy"] == "Never"
    # the pod's only credentials: its ServiceAccount token and the Config Center's
    env_names = {v["name"] for v in pod_spec["containers"][0]["env"]}
    assert not env_names & {"BAO_TOKEN", "VAULT_TOKEN", "KUBECONFIG"}
    assert lab.bao_version() == before + 1
    new_password = lab.bao_password()
    assert lab.secret_value("dragonfly", "dragonfly-password-secret", "password") == new_password
    assert lab.dragonfly_auth(new_password)
    for svc in CONSUMERS:
        assert lab.readyz(svc) == 200, svc

    # no volume: the pod's journal is in the cluster, shown from outside the pod
    found = re.search(r"Run (\S+)  dragonfly  succeeded  \(exit 0\)", logs)
    assert found, logs
    shown = lab.rotate("show", found.group(1), "-o", "json")
    assert shown.code == 0, shown.output
    report = json.loads(shown.stdout)
    assert report["status"] == "succeeded" and report["run_id"] == found.group(1)
    journals = lab.kjson("get", "configmaps", "-n", NS, "-l", "rotate.dev/journal=run")
    assert head_name(found.group(1)) in {c["metadata"]["name"] for c in journals["items"]}
    pod_name = pods["items"][0]["metadata"]["name"]
    sa_token = (lab.dir / "pods" / f"{NS}_{pod_name}" / "serviceaccount" / "token").read_text()
    assert sa_token.count(".") == 2  # the projected JWT the pod logged in with
    secrets = [new_password, lab.bao_password(before), lab.env["CONFIG_CENTER_TOKEN"],
               lab.env["BAO_TOKEN"], sa_token]
    assert not scan([("kubectl logs", logs), ("job", json.dumps(job)),
                     ("report", json.dumps(report))], secrets)
