"""What a run pushes lands in the real Prometheus Pushgateway (Debian's binary): read back
with ``GET /metrics``, grouped by job and credential; a failed run keeps the last success."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.chain.notify import NotifyConfig
from rotate.clients.pushgateway import Sample, push
from rotate.core.errors import TemporaryError
from rotate.core.waiting import CancelToken
from rotate.engine.api import Engine
from rotate.engine.model import RunReport
from tests.fakes import World, make_chain
from tests.fakes.world import WorldAdapters
from tests.support.engine import RecordingObserver, options
from tests.support.pushgateway import BINARY, SKIP_REASON, Pushgateway, running_pushgateway

pytestmark = pytest.mark.skipif(shutil.which(BINARY) is None, reason=SKIP_REASON)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Pushgateway]:
    with running_pushgateway(tmp_path) as gw:
        yield gw


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(make_chain(tmp_path))
    w.setup()
    yield w
    w.kube.close()


def value_of(text: str, name: str, **labels: str) -> float | None:
    """The sample ``name`` whose labels include ``labels`` in the exposition ``text``."""
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m is None or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def rotate_once(world: World, tmp_path: Path, gateway: Pushgateway) -> RunReport:
    engine = Engine(WorldAdapters(world), world.load_chain,
                    environ={"ROTATE_PUSHGATEWAY_URL": gateway.url})
    return engine.run(options(tmp_path, timeout=30), "dragonfly", RecordingObserver(),
                      CancelToken())


def test_the_adapter_pushes_a_group(gateway: Pushgateway) -> None:
    push(gateway.url, "rotate", {"credential": "c"},
         [Sample("rotate_test_gauge", "help", 2.5, (("stage", "3"),))], timeout=5)
    assert value_of(gateway.metrics(), "rotate_test_gauge", job="rotate", credential="c",
                    stage="3") == 2.5


def test_user_info_is_sent_as_basic_auth_not_in_the_address(gateway: Pushgateway) -> None:
    with_user = gateway.url.replace("http://", "http://pusher:s3cret-pass@")
    push(with_user, "rotate", {"credential": "d"}, [Sample("rotate_test_gauge", "help", 1.0)],
         timeout=5)
    assert value_of(gateway.metrics(), "rotate_test_gauge", job="rotate", credential="d") == 1.0


def test_an_unreachable_gateway_is_temporary_and_names_no_address(tmp_path: Path) -> None:
    with pytest.raises(TemporaryError) as err:
        push("http://pusher:s3cret-pass@127.0.0.1:9/", "rotate", {"credential": "d"},
             [Sample("rotate_test_gauge", "help", 1.0)], timeout=5)
    assert err.value.message == "pushgateway: push: unreachable"


def test_a_run_pushes_its_metrics(world: World, tmp_path: Path, gateway: Pushgateway) -> None:
    world.chain = dataclasses.replace(world.chain, notify=NotifyConfig(max_age=7776000.0))
    report = rotate_once(world, tmp_path, gateway)
    assert report.status == "succeeded", report.message
    text = gateway.metrics()
    group = {"job": "rotate", "credential": "dragonfly"}
    assert value_of(text, "rotate_last_run_success", **group, operation="rotate") == 1.0
    assert value_of(text, "rotate_last_run_info", **group, run_id=report.run_id,
                    status="succeeded", failed_step="") == 1.0
    assert value_of(text, "rotate_last_run_failed_steps", **group) == 0.0
    assert (value_of(text, "rotate_last_run_duration_seconds", **group) or -1) >= 0
    for stage in ("1", "2", "3", "4"):
        assert value_of(text, "rotate_last_run_stage_duration_seconds", **group,
                        stage=stage) is not None, stage
    written = value_of(text, "rotate_value_written_timestamp_seconds", **group)
    success = value_of(text, "rotate_last_success_timestamp_seconds", **group)
    assert written is not None and success is not None and written <= success
    assert value_of(text, "rotate_value_age_seconds", **group) is not None
    assert value_of(text, "rotate_max_age_seconds", **group) == 7776000.0

    world.eso_mode = "error"  # the next run fails at sync.wait
    failed = rotate_once(world, tmp_path, gateway)
    assert failed.exit_code == 11
    text = gateway.metrics()
    assert value_of(text, "rotate_last_run_success", **group) == 0.0
    assert value_of(text, "rotate_last_run_failed_steps", **group) == 1.0
    assert value_of(text, "rotate_last_run_info", **group, run_id=failed.run_id,
                    status="failed") == 1.0
    # pushadd: what a failed run does not push stays as the success pushed it
    assert value_of(text, "rotate_last_success_timestamp_seconds", **group) == success
    assert value_of(text, "rotate_value_written_timestamp_seconds", **group) == written


def test_status_pushes_whether_the_chain_is_closed(world: World, tmp_path: Path,
                                                   gateway: Pushgateway) -> None:
    cred = dataclasses.replace(world.chain.credentials["dragonfly"], max_age=86400.0 * 400)
    world.chain = dataclasses.replace(
        world.chain, credentials={**world.chain.credentials, "dragonfly": cred})
    assert rotate_once(world, tmp_path, gateway).status == "succeeded"
    engine = Engine(WorldAdapters(world), world.load_chain,
                    environ={"ROTATE_PUSHGATEWAY_URL": gateway.url})
    group = {"job": "rotate", "credential": "dragonfly"}
    (found,) = engine.status(options(tmp_path), ["dragonfly"])
    assert found.closed and engine.status_warning is None
    text = gateway.metrics()
    assert value_of(text, "rotate_chain_closed", **group) == 1.0
    # the credential's own maxAge, pushed by the run and by status alike
    assert value_of(text, "rotate_max_age_seconds", **group) == 86400.0 * 400
    world.vault.versions["infra/dragonfly"].append(
        {"password": "by-hand-0123456789abcdefghijklmnopqrstu", "username": "default"})
    (found,) = engine.status(options(tmp_path), ["dragonfly"])
    assert not found.closed
    assert value_of(gateway.metrics(), "rotate_chain_closed", **group) == 0.0
    # the run's own metrics stay as the run pushed them
    assert value_of(gateway.metrics(), "rotate_last_run_success", **group) == 1.0


def test_status_says_a_push_that_failed_and_still_answers(world: World,
                                                          tmp_path: Path) -> None:
    engine = Engine(WorldAdapters(world), world.load_chain,
                    environ={"ROTATE_PUSHGATEWAY_URL": "http://127.0.0.1:9/"})
    (found,) = engine.status(options(tmp_path), ["dragonfly"])
    assert found.version == 2
    assert engine.status_warning is not None
    assert engine.status_warning.startswith("metrics not pushed to pushgateway (http://127.0.0.1:9)")
