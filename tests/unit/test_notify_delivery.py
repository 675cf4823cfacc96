"""The webhook client and the outbox: retries with back-off, bounded attempts and time, a
deadline that returns whatever the receiver does, errors that name no address."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import respx

from rotate.clients.webhook import WebhookClient
from rotate.core.errors import TemporaryError
from rotate.engine.notify import shown_address, slack_document
from rotate.engine.outbox import Delivery, Job, Outbox

HOOK = "https://hooks.example.com/services/T0/B0/hook-token-in-the-path?sig=query-token"
QUICK = Delivery(attempts=4, first_backoff=0.001, max_backoff=0.002, request_timeout=2.0)


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as r:
        yield r


def _deliver(outbox: Outbox, client: WebhookClient, document: dict[str, str]) -> None:
    outbox.put(Job("webhook 1 (" + shown_address(HOOK) + ")",
                   lambda timeout: client.post(HOOK, document, timeout)))


def test_a_failed_post_is_retried_until_delivered(router: respx.MockRouter) -> None:
    route = router.post(HOOK).mock(side_effect=[
        httpx.Response(503), httpx.ConnectError("refused"), httpx.Response(200)])
    outbox = Outbox(QUICK, budget=30)
    _deliver(outbox, WebhookClient(), {"event": "run.start"})
    counts = outbox.close(deadline=time.monotonic() + 30)
    assert (counts.delivered, counts.failed) == (1, 0)
    assert outbox.attempts == [3] and route.call_count == 3
    assert json.loads(route.calls[-1].request.content) == {"event": "run.start"}


def test_attempts_are_bounded_and_the_failure_names_no_token(router: respx.MockRouter) -> None:
    route = router.post(HOOK).mock(return_value=httpx.Response(500))
    outbox = Outbox(QUICK, budget=30)
    _deliver(outbox, WebhookClient(), {})
    counts = outbox.close(deadline=time.monotonic() + 30)
    assert route.call_count == QUICK.attempts == outbox.attempts[0]
    assert counts.failed == 1
    (failure,) = counts.failures
    assert failure.startswith("webhook 1 (https://hooks.example.com): webhook: POST:")
    assert "HTTP 500" in failure and "after 4 attempt(s)" in failure
    assert "token" not in failure and "/services" not in failure


def test_a_refusal_no_retry_changes_is_not_retried(router: respx.MockRouter) -> None:
    route = router.post(HOOK).mock(return_value=httpx.Response(404))
    outbox = Outbox(QUICK, budget=30)
    _deliver(outbox, WebhookClient(), {})
    counts = outbox.close(deadline=time.monotonic() + 30)
    assert route.call_count == 1 and counts.failed == 1


def test_no_attempt_starts_after_the_budget() -> None:
    """Each attempt costs 1 s of a fake clock; a budget of 2.5 s allows three of four."""
    now = [0.0]

    def send(timeout: float) -> None:
        assert timeout <= 2.5 - now[0] + 1e-9  # an attempt's timeout is cut to the budget
        now[0] += 1.0
        raise TemporaryError("webhook", "POST", "unreachable")

    outbox = Outbox(QUICK, budget=2.5, clock=lambda: now[0])
    outbox.put(Job("webhook 1", send))
    counts = outbox.close(deadline=time.monotonic() + 30)
    assert outbox.attempts == [3] and counts.failed == 1


def test_close_returns_at_its_deadline_while_a_receiver_hangs() -> None:
    hanging = threading.Event()
    release = threading.Event()

    def send(timeout: float) -> None:
        hanging.set()
        release.wait(30)

    outbox = Outbox(QUICK, budget=30)
    outbox.put(Job("webhook 1", send))
    assert hanging.wait(5)
    counts = outbox.close(deadline=0.0)  # already past
    assert not release.is_set()  # returned while the receiver still held the request
    assert (counts.delivered, counts.failed) == (0, 1)
    assert counts.failures == ["webhook 1: not delivered by the deadline"]
    release.set()


def test_a_receiver_that_hangs_delays_no_other() -> None:
    release = threading.Event()
    delivered = threading.Event()
    outbox = Outbox(QUICK, budget=30)
    outbox.put(Job("webhook 1", lambda timeout: release.wait(30) and None))
    outbox.put(Job("pushgateway", lambda timeout: delivered.set()))
    assert delivered.wait(5)  # while webhook 1 still hangs
    counts = outbox.close(deadline=time.monotonic() + 0.1)
    assert (counts.delivered, counts.failed) == (1, 1) and not release.is_set()
    release.set()


def test_shown_address_keeps_scheme_and_host_only() -> None:
    assert shown_address(HOOK) == "https://hooks.example.com"
    assert shown_address("http://user:pass@gw:9091/x") == "http://gw:9091"
    assert shown_address("user:pass@gw:9091/metrics?t=1") == "gw:9091"


def test_slack_document_is_one_text() -> None:
    doc = {"event": "run.end", "run_id": "R", "operation": "rotate", "credential": "c",
           "outcome": "failed", "exit_code": 11, "failed_step": "3 sync.wait d/e",
           "state": "the backend holds v3", "resume": "rotate resume R --confirm",
           "rollback": "rotate rollback R --confirm", "message": ""}
    text = slack_document(doc)["text"]
    assert list(slack_document(doc)) == ["text"]
    assert text.splitlines() == [
        "rotate: rotate run R of credential c failed (exit 11) at step 3 sync.wait d/e.",
        "State now: the backend holds v3.",
        "Next: `rotate resume R --confirm` or `rotate rollback R --confirm`"]
