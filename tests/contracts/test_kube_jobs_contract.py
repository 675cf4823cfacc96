"""The Kube seam's calls behind ``apply: job`` (rotate.providers.job): a Job created, read
and deleted by kind, a values Secret created from :class:`Secret`s and deleted, a pod's log
tail — FakeKube and KubeClient against the lab's API server alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rotate_lab.cluster.api import tls

from rotate.clients.seams import Kube
from rotate.core.errors import ConflictError, NotFoundError
from rotate.core.secret import Secret
from tests.fakes import FakeKube
from tests.support.kube_apiserver import start_lab

LogWriter = Callable[[str, str, str], None]
VALUE = "Job-Contract-Value-0123456789"


@pytest.fixture(scope="module")
def material() -> tls.TlsMaterial:
    return tls.generate()


@pytest.fixture(params=["fake", "real"])
def kube(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Kube, LogWriter]]:
    if request.param == "fake":
        fake = FakeKube()
        fake.put({"kind": "Namespace", "metadata": {"name": "shop", "namespace": ""}})

        def fake_log(ns: str, pod: str, text: str) -> None:
            fake.pod_logs[(ns, pod)] = text
        yield fake, fake_log
        fake.close()
        return
    lab = start_lab(tmp_path, request.getfixturevalue("material"), port=9)

    def real_log(ns: str, pod: str, text: str) -> None:
        lab.logs[(ns, pod)] = text.encode()
    try:
        yield lab.client(), real_log
    finally:
        lab.api.stop()


def _job(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "rotate"}},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 60, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "rotator", "image": "rotator:1",
                                "command": ["rotator"]}]}}}}


def test_a_job_is_created_read_by_name_and_deleted(kube: tuple[Kube, LogWriter]) -> None:
    k, _ = kube
    created = k.create("Job", "shop", _job("rotate-x-set"))
    assert created["metadata"]["name"] == "rotate-x-set"
    got = k.get("Job", "shop", "rotate-x-set")
    assert got["spec"]["activeDeadlineSeconds"] == 60
    assert got["spec"]["template"]["spec"]["containers"][0]["command"] == ["rotator"]
    with pytest.raises(ConflictError):  # a phase's Job is created once
        k.create("Job", "shop", _job("rotate-x-set"))
    k.delete("Job", "shop", "rotate-x-set")
    with pytest.raises(NotFoundError):
        k.get("Job", "shop", "rotate-x-set")


def test_a_values_secret_is_created_from_secrets_and_deleted(
        kube: tuple[Kube, LogWriter]) -> None:
    k, _ = kube
    k.create_secret("shop", "rotate-x-set-values", {"old": Secret(VALUE),
                                                     "new": Secret("n-" + VALUE)},
                    labels={"app.kubernetes.io/managed-by": "rotate"})
    got = k.get("Secret", "shop", "rotate-x-set-values")
    assert "data" not in got and VALUE not in repr(got)
    assert got["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "rotate"
    assert k.read_secret_key("shop", "rotate-x-set-values", "new") == Secret("n-" + VALUE)
    assert k.secret_keys("shop", "rotate-x-set-values") == ["new", "old"]
    with pytest.raises(ConflictError):
        k.create_secret("shop", "rotate-x-set-values", {"old": Secret(VALUE)})
    k.delete("Secret", "shop", "rotate-x-set-values")
    with pytest.raises(NotFoundError):
        k.delete("Secret", "shop", "rotate-x-set-values")


def test_a_pods_log_tail_is_its_last_lines(kube: tuple[Kube, LogWriter]) -> None:
    k, write_log = kube
    with pytest.raises(NotFoundError):
        k.pod_log_tail("shop", "rotate-x-set-abcde", 5)
    k.create("Pod", "shop", {"metadata": {"name": "rotate-x-set-abcde"}, "spec": {
        "containers": [{"name": "rotator", "image": "rotator:1"}]}})
    write_log("shop", "rotate-x-set-abcde", "".join(f"line {i}\n" for i in range(10)))
    assert k.pod_log_tail("shop", "rotate-x-set-abcde", 3) == "line 7\nline 8\nline 9\n"
