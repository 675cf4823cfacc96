"""The in-cluster examples of examples/in-cluster/ run for real in the lab, set up as
docs/in-cluster.md tells an operator to (the ``in_cluster`` fixture: tests/support/incluster.py),
with ``examples/in-cluster/job.yaml`` and ``cronjob.yaml`` rendered for the lab (only the
addresses of OpenBao and the Config Center change).

The lab's Job controller creates the pod, its kubelet runs the ``rotate`` console script as
the pod's process with the ServiceAccount token mounted and ``KUBERNETES_SERVICE_HOST``/
``PORT`` set: rotate finds the cluster in-cluster and logs in to OpenBao with that token.
No kubeconfig, no OpenBao token reaches the pod.  The lab's CronJob controller starts the
CronJob's Job as kube-controller-manager does.
"""

from __future__ import annotations

import calendar
import copy
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from rotate.clients.cluster_journals import head_name
from tests.support.incluster import NS, SA, chain_configmap, job_finished, rendered
from tests.support.labtools import CONSUMERS, Lab, scan
from tests.support.polling import eventually

pytestmark = pytest.mark.lab

JOB = "rotate-dragonfly"


def test_the_example_job_rotates_dragonfly_in_the_cluster(in_cluster: Lab,
                                                           repo_root: Path) -> None:
    lab = in_cluster
    before = lab.bao_version()

    lab.kubectl_apply(rendered(lab, repo_root / "examples" / "in-cluster" / "job.yaml"))
    job = eventually(lambda: job_finished(lab, JOB), 150, "the Job to finish")
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


def value_age(lab: Lab) -> float:
    """Seconds since OpenBao wrote dragonfly's current value (what ``maxAge`` is held to)."""
    meta = lab.bao("GET", "secret/metadata/infra/dragonfly").json()["data"]
    written = meta["versions"][str(meta["current_version"])]["created_time"][:19]
    return time.time() - calendar.timegm(time.strptime(written, "%Y-%m-%dT%H:%M:%S"))


def cron_jobs(lab: Lab, cronjob: str) -> list[dict[str, Any]]:
    listed = lab.kjson("get", "jobs", "-n", NS, "-l",
                       f"batch.kubernetes.io/cronjob-name={cronjob}")
    return list(listed["items"])


def test_the_example_cronjob_rotates_a_credential_past_its_max_age(in_cluster: Lab,
                                                                    repo_root: Path) -> None:
    lab = in_cluster
    cronjob = rendered(lab, repo_root / "examples" / "in-cluster" / "cronjob.yaml")
    name, spec = cronjob["metadata"]["name"], cronjob["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] >= 60
    # Here: once a day, at this very minute (UTC), which the controller is then shown it
    # missed (below), as on any cluster; it comes again only tomorrow.  History: keep one,
    # to see the older pruned.
    assert spec["timeZone"] == "Etc/UTC"
    spec["schedule"] = time.strftime("%M %H * * *", time.gmtime())
    spec["successfulJobsHistoryLimit"] = 1
    lab.kubectl_apply(chain_configmap(max_age="3s"))
    eventually(lambda: value_age(lab) > 3, 10, "dragonfly's value to pass its maxAge")
    before = lab.bao_version()

    lab.kubectl_apply(cronjob)
    # lastScheduleTime two minutes back: the controller has missed a time and starts the
    # most recent one now (what it does after an outage shorter than the starting deadline)
    earlier = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 120))
    lab.kubectl("patch", "cronjob", "-n", NS, name, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"lastScheduleTime": earlier}}))
    [scheduled] = eventually(lambda: cron_jobs(lab, name), 30, "the CronJob to start a Job")
    job_name = scheduled["metadata"]["name"]
    assert re.fullmatch(rf"{name}-\d+", job_name)
    assert "batch.kubernetes.io/cronjob-scheduled-timestamp" in scheduled["metadata"][
        "annotations"]
    job = eventually(lambda: job_finished(lab, job_name), 150, "the scheduled Job to finish")
    logs = lab.kubectl("logs", "-n", NS, f"job/{job_name}")
    assert job["status"].get("succeeded") == 1, (job["status"], logs)
    assert lab.bao_version() == before + 1
    assert value_age(lab) < 60
    status = lab.rotate("status", "dragonfly")
    assert status.code == 0, status.output
    report = json.loads(logs[logs.index("{"):])  # -o json: the run's report on stdout
    assert report["status"] == "succeeded" and report["credential"] == "dragonfly", report

    def settled() -> dict[str, Any] | None:
        st: dict[str, Any] = lab.kjson("get", "cronjob", "-n", NS, name).get("status") or {}
        return st if "active" not in st and "lastSuccessfulTime" in st else None

    assert eventually(settled, 15, "the CronJob to see its Job succeed")["lastScheduleTime"]
    row = lab.kubectl("get", "cronjob", "-n", NS, name).splitlines()[1].split()
    assert row[-3] == "0" and row[-2] != "<none>", row  # ACTIVE 0, a LAST SCHEDULE

    # History: a second finished Job of the CronJob's (as `kubectl create job --from` makes
    # it, sent as JSON; `rotate --version`, the cheapest run) leaves room for one only: the
    # older is deleted with its pod.
    owner = lab.kjson("get", "cronjob", "-n", NS, name)["metadata"]["uid"]
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    template["spec"]["template"]["spec"]["containers"][0]["args"] = ["--version"]
    lab.kubectl_apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": f"{name}-manual", "namespace": NS, "labels": template["metadata"]["labels"],
        "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": name,
                             "uid": owner, "controller": True, "blockOwnerDeletion": True}]},
        "spec": template["spec"]})
    manual = eventually(lambda: job_finished(lab, f"{name}-manual"), 60, "the manual run")
    assert manual["status"].get("succeeded") == 1, manual["status"]
    eventually(lambda: cron_jobs(lab, name) == [], 15, "the older Job pruned (limit 1)")
    pods = lab.kjson("get", "pods", "-n", NS, "-l", f"batch.kubernetes.io/job-name={job_name}")
    assert pods["items"] == []
    assert lab.kjson("get", "job", "-n", NS, f"{name}-manual")["metadata"]["name"]
    lab.kubectl("delete", "cronjob", "-n", NS, name)
    lab.kubectl_apply(chain_configmap())
