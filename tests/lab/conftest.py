"""Lab fixtures: one lab (fast profile) per session, and fresh labs for destructive tests.

``lab`` starts once per session with ``control.up`` and is stopped with ``control.down`` at
the end, also when a test or ``up`` itself fails.  ``fresh_lab(reloader=...)`` starts a
private lab for one test and stops it afterwards.  ``lab_env`` is the environment a user has
after ``. DIR/env`` (without any BAO_/VAULT_/ROTATE_/KUBECONFIG of the caller's shell).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.apiserver import ApiLab, serving_apiserver
from tests.support.cronjobs import CronLab
from tests.support.labhandle import LabHandle, start_lab
from tests.support.minicluster import MiniCluster, kubectl_over, running_cluster


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    lab_dir = tmp_path_factory.mktemp("lab")  # mode 0700, as pytest makes them
    try:
        yield start_lab(lab_dir)
    finally:
        from rotate_lab import control

        control.down(lab_dir)


@pytest.fixture
def lab_env(lab: LabHandle) -> dict[str, str]:
    """os.environ + the lab's env file, for subprocess runs of ``rotate`` and ``kubectl``."""
    return lab.process_env


@pytest.fixture
def fresh_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LabHandle]]:
    """A factory: ``fresh_lab(reloader=True, nice=0)`` starts a private lab, stopped at
    teardown."""
    started: list[Path] = []

    def make(*, reloader: bool = False, nice: int = 0) -> LabHandle:
        lab_dir = tmp_path_factory.mktemp("freshlab")
        started.append(lab_dir)
        return start_lab(lab_dir, reloader=reloader, nice=nice)

    yield make
    from rotate_lab import control

    for lab_dir in started:
        control.down(lab_dir)


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiLab]:
    """An in-process Store + ApiServer (tests/support/apiserver.py), one per test module."""
    with serving_apiserver(tmp_path_factory.mktemp("apiserver")) as api:
        yield api


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MiniCluster]:
    """The real controllers and kubelet over a real Store (tests/support/minicluster.py)."""
    with running_cluster(tmp_path / "lab") as mc:
        yield mc


@pytest.fixture
def kubectl(cluster: MiniCluster, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Real kubectl against the lab API server over ``cluster``'s store."""
    with kubectl_over(cluster, tmp_path) as run:
        yield run


@pytest.fixture
def cron(tmp_path: Path) -> Iterator[CronLab]:
    """A MiniCluster with the Job and CronJob controllers, the latter on a movable clock,
    and namespace ``cron`` with ServiceAccount ``runner``; no pod process outlives it."""
    from rotate_lab.cluster.api.tokens import TokenIssuer
    from rotate_lab.cluster.context import ApiEndpoint
    from rotate_lab.cluster.controllers.cronjob import CronJobController
    from rotate_lab.cluster.controllers.job import JobController

    from tests.support.cronjobs import NS, MovableClock
    from tests.support.minicluster import namespace

    with running_cluster(tmp_path / "lab") as mc:
        mc.ctx.tokens = TokenIssuer()
        mc.ctx.api = ApiEndpoint("127.0.0.1", 6443, b"-----BEGIN CERTIFICATE-----\nlab\n")
        clock = MovableClock()
        controller = CronJobController(mc.ctx, clock=clock)
        for c in (JobController(mc.ctx), controller):
            c.start()
            mc.controllers.append(c)
        mc.apply(namespace(NS), {"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": "runner", "namespace": NS}})
        yield CronLab(mc, controller, clock)


@pytest.fixture
def cron_kubectl(cron: CronLab, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Real kubectl against the lab API server over ``cron``'s store (kubeconfig in
    ``tmp_path/kubeconfig``, for the kubernetes client too)."""
    with kubectl_over(cron.cluster, tmp_path) as run:
        yield run
