"""End-to-end fixtures: each module gets its own lab (fast profile) in a temp dir (mode 0700,
as pytest makes them: the lab needs no directory others can reach)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.labtools import Lab, read_env_file

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if shutil.which("redis-server") is None or shutil.which("kubectl") is None:
        pytest.fail(
            "the lab needs redis-server and kubectl (make install puts redis-server in place)"
        )
    from rotate_lab import control

    lab_dir = tmp_path_factory.mktemp("lab")
    try:
        control.up(lab_dir, "fast", False, on_progress=lambda _msg: None)
        yield Lab(lab_dir, read_env_file(lab_dir / "env"))
    finally:
        control.down(lab_dir)


@pytest.fixture(scope="module")
def bugsink_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lab started with ``--with bugsink`` (the real Bugsink server from its own venv)."""
    from rotate_lab.systems import bugsink

    try:
        bugsink.python()
    except bugsink.NoBugsink as exc:
        pytest.fail(str(exc))
    yield from _lab_with(tmp_path_factory, "bugsink")


@pytest.fixture(scope="module")
def mariadb_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lab started with ``--with mariadb`` (MariaDB, its reader ``catalog`` and the chain's
    credential ``mariadb``, which needs the plug-in examples/provider-mariadb installed)."""
    from rotate_lab.systems import mariadb

    try:
        mariadb.check_available()
    except mariadb.NoMariaDb as exc:
        pytest.fail(str(exc))
    yield from _lab_with(tmp_path_factory, "mariadb")


@pytest.fixture(scope="module")
def mariadb_rotation(mariadb_lab: Lab) -> dict[str, Any]:
    """The module's one ``rotate mariadb --confirm`` under load (test_mariadb_lab.py)."""
    from tests.support.mariadb_lab import rotate_under_load

    return rotate_under_load(mariadb_lab)


@pytest.fixture(scope="module")
def prometheus_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lab started with ``--with prometheus --with pushgateway`` (Debian's Prometheus
    scraping the shop's /metrics and its Pushgateway; ``PROMETHEUS_URL`` and
    ``PUSHGATEWAY_URL`` in its env file).  Skipped where either is not installed
    (``make install`` installs both)."""
    from rotate_lab.systems import prometheus, pushgateway

    try:
        prometheus.binary()
        pushgateway.binary()
    except (prometheus.NoPrometheus, pushgateway.NoPushgateway) as exc:
        pytest.skip(str(exc))
    yield from _lab_with(tmp_path_factory, "prometheus", "pushgateway")


def _lab_with(factory: pytest.TempPathFactory, *parts: str) -> Iterator[Lab]:
    """A lab started with ``--with PART`` for each part, in a directory of its own, stopped
    afterwards."""
    from rotate_lab import control

    lab_dir = factory.mktemp(f"{parts[0]}-lab")
    try:
        control.up(lab_dir, "fast", False, on_progress=lambda _msg: None, extras=parts)
        yield Lab(lab_dir, read_env_file(lab_dir / "env"))
    finally:
        control.down(lab_dir)


@pytest.fixture(scope="module")
def in_cluster(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """``lab`` set up for rotate in the cluster as docs/in-cluster.md says (RBAC, OpenBao's
    kubernetes auth, chain, schemas, Config Center token: tests/support/incluster.py)."""
    from tests.support import incluster

    incluster.set_up(lab, tmp_path_factory.mktemp("in-cluster"))
    return lab
