"""Per-consumer lanes (rotate.engine.executor): consecutive parallel steps of kinds that share
a lane run per consumer, each consumer's steps in plan order, consumers independent of one
another; once a step of the group fails, no further step of the group starts.

Each test holds one consumer's step until another consumer has got further than the kind
order alone would allow, with a deadline: grouped by kind, the held step would never be
released and the test fails at the deadline instead of hanging."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from rotate.core.errors import ForbiddenError
from rotate.engine.model import PlannedStep, StepRecord
from tests.fakes import World
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    run,
)

DEADLINE = 5.0


def _hold(obs: RecordingObserver, kind: str, subject: str, until: threading.Event,
          released: list[bool]) -> None:
    """Hold ``subject``'s step of ``kind`` at its start until ``until`` is set (or the
    deadline passes); ``released`` records which."""
    def hold(step: PlannedStep) -> None:
        if step.subject == subject:
            released.append(until.wait(timeout=DEADLINE))
    obs.on_start[kind] = hold


def _when(obs: RecordingObserver, kind: str, subject: str, event: threading.Event) -> None:
    def mark(step: PlannedStep) -> None:
        if step.subject == subject:
            event.set()
    obs.on_start[kind] = mark


def _order(tmp_path: Path, run_id: str) -> dict[str, list[tuple[str, str]]]:
    """Per subject, its step records (event, kind) in journal order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for rec in journal_lines(tmp_path, run_id):
        if rec["event"] in ("step.start", "step.done") and rec.get("kind") in LANED:
            subject = rec.get("subject") or _subject(rec["target"])
            out.setdefault(subject, []).append((rec["event"], rec["kind"]))
    return out


LANED = ("token.mint", "config.write", "consumer.restart", "consumer.wait", "readyz.check",
         "token.revoke")


def _subject(target: str) -> str:
    """cart from ``shop/cart bootstrap``, ``shop/cart-config-token#token``,
    ``deployment/shop/cart``, ``shop/cart:http/readyz`` or ``cart``."""
    name = target.split(" ")[0].split(":")[0].split("#")[0].rstrip("/").split("/")[-1]
    return name.removesuffix("-config-token")


@pytest.mark.parametrize(("held", "until"), [
    # order's document write is held until cart's restart has started: grouped by kind,
    # cart's restart would wait for every document write first
    ("config.write", "consumer.restart"),
    # order's rollout proof is held until cart's old tokens are being revoked
    ("consumer.wait", "token.revoke"),
], ids=["prepared", "finished"])
def test_a_consumer_goes_on_without_waiting_for_the_others(
        world: World, tmp_path: Path, held: str, until: str) -> None:
    obs = RecordingObserver()
    cart_got_there = threading.Event()
    released: list[bool] = []
    _hold(obs, held, "order", cart_got_there, released)
    _when(obs, until, "cart", cart_got_there)
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert released == [True]


def test_each_consumer_keeps_its_own_order(world: World, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    order = _order(tmp_path, report.run_id)
    assert set(order) == {"cart", "order", "user"}
    for subject, records in order.items():
        # one step at a time per consumer: start, done, start, done … in plan order
        assert records == [(event, kind) for kind in LANED
                           for event in ("step.start", "step.done")], subject


def test_a_failed_step_starts_no_further_step_of_its_group(world: World,
                                                           tmp_path: Path) -> None:
    # Two consumers at once: cart's document write fails while order's is held at its
    # start; order's write then finishes (a step already running), but neither order's next
    # step nor any step of user (queued behind them) starts.
    world.cc.faults.arm("put_key", ForbiddenError("config center", "put", "not allowed",
                                                  status=403))
    obs = RecordingObserver()
    cart_failed = threading.Event()
    released: list[bool] = []
    _hold(obs, "config.write", "order", cart_failed, released)

    def failed(step: PlannedStep, record: StepRecord) -> None:
        if step.subject == "cart" and record.status == "failed":
            cart_failed.set()
    obs.on_finish["config.write"] = failed
    report = run(world, tmp_path, obs, max_parallel=2)
    assert report.status == "failed" and released == [True], report.message
    assert report.message.startswith("Step 7 config.write on shop/cart bootstrap failed")
    started: list[tuple[Any, ...]] = [(r["kind"], _subject(r["target"]))
                                      for r in journal_lines(tmp_path, report.run_id)
                                      if r["event"] == "step.start" and r["kind"] in LANED
                                      and r["kind"] != "token.mint"]  # minted first
    assert started == [("config.write", "cart"), ("config.write", "order")] or started == [
        ("config.write", "order"), ("config.write", "cart")]
