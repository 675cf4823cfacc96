"""A run's webhooks and metrics, end to end over the fakes: what is posted on start, success
and failure, that no value or fingerprint is ever in it, and that receivers that fail or hang
neither fail the run nor hold it past ``notify.timeout``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from rotate.chain.notify import Endpoint, NotifyConfig, WebhookConfig
from rotate.core.secret import Secret
from rotate.core.waiting import CancelToken
from rotate.engine.api import Engine
from rotate.engine.model import RunReport
from tests.fakes import World, assert_no_secret
from tests.fakes.world import WorldAdapters
from tests.support.engine import RecordingObserver, journal_lines, options
from tests.support.silent_server import silent_server

JSON_HOOK = "https://alerts.example.com/rotate?token=json-hook-token"
SLACK_HOOK = "https://hooks.slack.example.com/services/T0/B0/slack-hook-token"


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as r:
        r.post(JSON_HOOK).mock(return_value=httpx.Response(200))
        r.post(SLACK_HOOK).mock(return_value=httpx.Response(200))
        yield r


def _notify(world: World, **kw: Any) -> None:
    defaults: dict[str, Any] = {"webhooks": (
        WebhookConfig(Endpoint(url=JSON_HOOK)),
        WebhookConfig(Endpoint(url_env="SLACK_URL"), "slack"))}
    world.chain = dataclasses.replace(world.chain, notify=NotifyConfig(**{**defaults, **kw}))


def _run(world: World, tmp_path: Path, observer: RecordingObserver,
         environ: Mapping[str, str] | None = None, **kw: Any) -> RunReport:
    engine = Engine(WorldAdapters(world), world.load_chain,
                    environ={"SLACK_URL": SLACK_HOOK} if environ is None else environ)
    return engine.run(options(tmp_path, timeout=30), "dragonfly", observer, CancelToken(), **kw)


def _posted(router: respx.MockRouter, url: str) -> list[dict[str, Any]]:
    return [json.loads(call.request.content) for call in router.calls
            if str(call.request.url) == url]


def _run_end(tmp_path: Path, run_id: str) -> dict[str, Any]:
    return next(r for r in journal_lines(tmp_path, run_id) if r["event"] == "run.end")["data"]


def test_a_succeeded_run_posts_start_and_end(world: World, tmp_path: Path,
                                             router: respx.MockRouter) -> None:
    _notify(world)
    report = _run(world, tmp_path, RecordingObserver())
    assert report.status == "succeeded", report.message
    start, end = _posted(router, JSON_HOOK)
    assert start["event"] == "run.start" and start["outcome"] == "running"
    assert {k: end[k] for k in ("event", "run_id", "operation", "credential", "outcome",
                                "exit_code", "failed_step", "resume")} == {
        "event": "run.end", "run_id": report.run_id, "operation": "rotate",
        "credential": "dragonfly", "outcome": "succeeded", "exit_code": 0,
        "failed_step": None, "resume": ""}
    assert end["state"].startswith("the backend secret/infra/dragonfly holds v3")
    slack = _posted(router, SLACK_HOOK)
    assert [list(doc) for doc in slack] == [["text"], ["text"]]
    assert slack[1]["text"].startswith(
        f"rotate: rotate run {report.run_id} of credential dragonfly succeeded.")
    assert _run_end(tmp_path, report.run_id)["notify"] == {
        "delivered": 4, "failed": 0, "failures": []}


def test_a_failed_run_posts_the_failed_step_state_and_next_command(
        world: World, tmp_path: Path, router: respx.MockRouter) -> None:
    _notify(world)
    world.eso_mode = "error"
    report = _run(world, tmp_path, RecordingObserver())
    assert report.exit_code == 11
    end = _posted(router, JSON_HOOK)[-1]
    failed = next(s for s in report.steps if s.status == "failed")
    assert end["outcome"] == "failed" and end["exit_code"] == 11
    assert end["failed_step"] == f"{failed.index} sync.wait {failed.target}"
    assert end["resume"] == f"rotate resume {report.run_id} --confirm"
    assert end["rollback"] == f"rotate rollback {report.run_id} --confirm"
    assert "holds v3" in end["state"] and end["message"] == report.message
    text = _posted(router, SLACK_HOOK)[-1]["text"]
    assert f"failed (exit 11) at step {failed.index} sync.wait" in text
    assert f"Next: `rotate resume {report.run_id} --confirm`" in text


def test_no_value_nor_fingerprint_is_ever_posted(world: World, tmp_path: Path,
                                                 router: respx.MockRouter) -> None:
    _notify(world)
    supplied = "supplied-value-0123456789abcdefghijklmnop"
    report = _run(world, tmp_path, RecordingObserver(), new_value=Secret(supplied))
    assert report.status == "succeeded", report.message
    start = next(r for r in journal_lines(tmp_path, report.run_id) if r["event"] == "run.start")
    fingerprint = start["data"]["value_fingerprint"]
    old = world.vault.versions["infra/dragonfly"][-2]["password"]
    assert world.vault.current("infra/dragonfly", "password") == supplied
    bodies = [call.request.content.decode() for call in router.calls]
    assert len(bodies) == 4
    for body in bodies:
        assert_no_secret(body, supplied, old, fingerprint["hash"], fingerprint["salt"])


def test_failing_receivers_are_warnings_and_journaled_not_a_failed_run(
        world: World, tmp_path: Path, router: respx.MockRouter) -> None:
    router.post(JSON_HOOK).mock(return_value=httpx.Response(500))
    _notify(world, pushgateway=Endpoint(url="http://127.0.0.1:9/"), timeout=0.5)
    observer = RecordingObserver()
    report = _run(world, tmp_path, observer, environ={})  # $SLACK_URL unset
    assert report.status == "succeeded" and report.exit_code == 0
    notified = _run_end(tmp_path, report.run_id)["notify"]
    assert notified["delivered"] == 0 and notified["failed"] == 4  # start, end ×1, metrics
    assert notified["failures"][0] == "webhook 2: $SLACK_URL is not set"
    warnings = [text for kind, text, _ in observer.events if kind == "note"]
    assert len(warnings) == 4 and all(w.startswith("warning: notification not delivered:")
                                      for w in warnings)
    shown = "\n".join(warnings) + json.dumps(notified)
    assert "webhook 1 (https://alerts.example.com)" in shown
    assert "json-hook-token" not in shown and "slack-hook-token" not in shown


def test_receivers_that_hang_do_not_hold_the_run_past_the_notify_timeout(
        world: World, tmp_path: Path) -> None:
    with silent_server() as hook, silent_server() as gateway:
        world.chain = dataclasses.replace(world.chain, notify=NotifyConfig(
            webhooks=(WebhookConfig(Endpoint(url=hook.url + "/hook")),), timeout=1.0))
        report = _run(world, tmp_path, RecordingObserver(),
                      environ={"ROTATE_PUSHGATEWAY_URL": gateway.url})
        # returned while both receivers still held their requests: the deadline, not they,
        # ended the wait
        assert not hook.released.is_set() and not gateway.released.is_set()
        assert hook.accepted >= 1 and gateway.accepted >= 1
    assert report.status == "succeeded"
    notified = _run_end(tmp_path, report.run_id)["notify"]
    assert notified["delivered"] == 0 and notified["failed"] >= 2


def test_nothing_configured_changes_nothing(world: World, tmp_path: Path) -> None:
    observer = RecordingObserver()
    report = _run(world, tmp_path, observer, environ={})
    assert report.status == "succeeded"
    assert "notify" not in _run_end(tmp_path, report.run_id)
    assert not [e for e in observer.events if e[0] == "note"]


def test_a_plain_http_webhook_to_a_remote_host_is_warned_about(
        world: World, tmp_path: Path, router: respx.MockRouter) -> None:
    plain = "http://hooks.example.com/services/plain-hook-token"
    router.post(plain).mock(return_value=httpx.Response(204))
    world.chain = dataclasses.replace(world.chain, notify=NotifyConfig(
        webhooks=(WebhookConfig(Endpoint(url=plain)),)))
    observer = RecordingObserver()
    report = _run(world, tmp_path, observer, environ={})
    assert report.status == "succeeded"
    notes = [text for kind, text, _ in observer.events if kind == "note"]
    assert notes == ["warning: webhook 1 (http://hooks.example.com) is plain http:// to "
                     "hooks.example.com, which is not loopback: what it carries crosses the "
                     "network in clear; use https://"]
    assert _run_end(tmp_path, report.run_id)["notify"]["delivered"] == 2
