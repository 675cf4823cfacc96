"""Metrics and notifications of a run: an observer of the run, like its Kubernetes Events.

The executor tells a :class:`RunNotifier` when the run starts, when each step ends and how
the run ends.  The notifier posts to the chain's webhooks (``notify.webhooks``: rotate's
JSON document or a Slack ``{"text": …}``) on start and end, and pushes the run's metrics
(rotate.engine.run_metrics) to the Pushgateway (``ROTATE_PUSHGATEWAY_URL``, else
``notify.pushgateway``) at the end.  docs/notifications.md is the reference.

Invariants:

* Best effort and bounded: every delivery goes through an :class:`~rotate.engine.outbox.Outbox`
  (a background thread, retries with back-off); the run's end waits for them at most
  ``notify.timeout``.  A notification that was not delivered never fails or changes the run:
  it is a warning line (the observer's ``note``) and a count with its reason in the
  ``run.end`` record (``notify``).
* No value: documents and samples hold run ids, credential and step names, statuses, the
  report's message (which holds no value) and commands — never a value or its fingerprint.
* No token shown: a webhook is named by its position and its scheme and host only (its
  path and query may be the token, as a Slack webhook's are).
* Nothing configured, nothing done: no thread, no import of an HTTP library, and the
  ``run.end`` record unchanged.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from rotate.chain.notify import WebhookConfig
from rotate.core.timestamps import parse_rfc3339, rfc3339, utcnow
from rotate.core.urls import display_url, plain_remote_host
from rotate.engine import journal as journal_mod
from rotate.engine import run_metrics
from rotate.engine.chain_state import describe_state
from rotate.engine.kinds import find
from rotate.engine.kinds.base import Run
from rotate.engine.model import PlannedStep, StepRecord
from rotate.engine.next_commands import resume_command, rollback_command
from rotate.engine.outbox import Delivery, Job, Outbox

#: overrides (or, without one, adds) the chain file's ``notify.pushgateway``
PUSHGATEWAY_ENV = "ROTATE_PUSHGATEWAY_URL"

#: past ``notify.timeout``, the time the end gives the last attempt (cut to the timeout) to be
#: counted with its own reason rather than as "not delivered by the deadline"
COUNT_GRACE = 0.25

#: a run's statuses after which it can be resumed (the report's rule)
_RESUMABLE = ("failed", "interrupted", "rollback-failed")


def shown_address(url: str) -> str:
    """Scheme and host of ``url``: what may name a webhook in a message."""
    scheme, sep, rest = display_url(url).partition("://")
    return f"{scheme}{sep}{rest.partition('/')[0]}" if sep else scheme.partition("/")[0]


class RunNotifier:
    """Thread-safe (the executor's parallel steps report from worker threads)."""

    def __init__(self, run: Run, warn: Callable[[str], None],
                 delivery: Delivery | None = None) -> None:
        self._run = run
        self._warn = warn
        cfg = run.chain.notify
        env = run.environ
        self._timeout = cfg.timeout
        self._problems: list[str] = []
        self._hooks: list[tuple[str, str, WebhookConfig]] = []  # (shown, url, config)
        for number, hook in enumerate(cfg.webhooks, start=1):
            url = hook.endpoint.resolve(env)
            if url is None:
                self._problems.append(f"webhook {number}: ${hook.endpoint.url_env} is not set")
                continue
            shown = f"webhook {number} ({shown_address(url)})"
            plain = plain_remote_host(url)
            if plain:
                warn(f"warning: {shown} is plain http:// to {plain}, which is not loopback: "
                     "what it carries crosses the network in clear; use https://")
            self._hooks.append((shown, url, hook))
        self._gateway = env.get(PUSHGATEWAY_ENV) or (
            cfg.pushgateway.resolve(env) if cfg.pushgateway is not None else None)
        if cfg.pushgateway is not None and self._gateway is None:
            self._problems.append(f"pushgateway: ${cfg.pushgateway.url_env} is not set")
        self.enabled = bool(self._hooks or self._gateway or self._problems)
        self._outbox = Outbox(delivery or Delivery(), budget=self._timeout)
        self._lock = threading.Lock()
        self._began = time.monotonic()
        self._stages: dict[int, tuple[float, float]] = {}  # stage → (first start, last end)
        self._failed: list[tuple[int, str]] = []  # (index, "index kind target")
        self._started = False
        self._deadline: float | None = None
        self._client: Any = None

    # ------------------------------------------------------------------ the run's moments

    def run_started(self) -> None:
        """The run begins executing steps (again, on resume); idempotent."""
        with self._lock:
            if self._started or not self.enabled:
                return
            self._started = True
        self._post({"event": "run.start", "outcome": "running", "exit_code": None,
                    "failed_step": None, "state": "", "message": "", "resume": "",
                    "rollback": ""})

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        if not self.enabled:
            return
        end = time.monotonic()
        start = end - (record.seconds or 0.0)
        with self._lock:
            first, last = self._stages.get(step.stage, (start, end))
            self._stages[step.stage] = (min(first, start), max(last, end))
            if record.status == "failed":
                self._failed.append((step.index, f"{step.index} {step.kind} {step.target}"))

    def run_end(self, status: str, exit_code: int, message: str) -> None:
        """Queue the end notices and the metrics; :meth:`flush` waits for them."""
        if not self.enabled:
            return
        self._deadline = time.monotonic() + self._timeout
        run = self._run
        state = journal_mod.load_file(run.journal.path, run.run_id)
        with self._lock:
            # the lowest-numbered first: the step the run failed with (chain.md), not an
            # undo step numbered after the plan, nor a parallel step that failed earlier
            failed = [text for _, text in sorted(self._failed)]
            stages = {stage: round(last - first, 3)
                      for stage, (first, last) in self._stages.items()}
        resume = resume_command(run.run_id) if status in _RESUMABLE else ""
        rollback = (rollback_command(run.run_id)
                    if run.start.operation == "rotate" and status != "succeeded" else "")
        self._post({"event": "run.end", "outcome": status, "exit_code": exit_code,
                    "failed_step": failed[0] if failed else None,
                    "state": describe_state(run, state), "message": message,
                    "resume": resume, "rollback": rollback})
        if self._gateway is not None:
            outcome = run_metrics.RunOutcome(
                run_id=run.run_id, operation=run.start.operation, status=status,
                seconds=round(time.monotonic() - self._began, 3), ended_at=time.time(),
                stage_seconds=stages, failed_steps=failed,
                value_written_at=_value_written_at(state, status),
                max_age=run.credential.max_age or run.chain.notify.max_age)
            self._push(self._gateway, run_metrics.samples(outcome))

    def flush(self) -> dict[str, Any] | None:
        """Wait for the queued deliveries until the deadline; warn about each one that failed.
        What the ``run.end`` record holds (``notify``), or None when nothing is configured."""
        if not self.enabled:
            return None
        deadline = self._deadline if self._deadline is not None \
            else time.monotonic() + self._timeout
        counts = self._outbox.close(deadline + COUNT_GRACE)
        counts.failed += len(self._problems)
        counts.failures[:0] = self._problems
        for failure in counts.failures:
            self._warn(f"warning: notification not delivered: {failure} (the run is not "
                       "affected)")
        if self._client is not None:
            threading.Thread(target=self._client.close, daemon=True).start()
        return counts.to_json()

    # ------------------------------------------------------------------ deliveries

    def _post(self, fields: Mapping[str, Any]) -> None:
        if not self._hooks:
            return
        run = self._run
        document = {"run_id": run.run_id, "operation": run.start.operation,
                    "credential": run.start.credential, "at": rfc3339(utcnow(), micro=False),
                    **fields}
        client = self._webhook_client()
        for shown, url, hook in self._hooks:
            body = slack_document(document) if hook.format == "slack" else document
            self._outbox.put(Job(f"{shown} {fields['event']}",
                                 functools.partial(client.post, url, body), receiver=shown))

    def _webhook_client(self) -> Any:
        from rotate.clients.webhook import WebhookClient

        with self._lock:
            if self._client is None:
                self._client = WebhookClient()
            return self._client

    def _push(self, url: str, samples: list[Any]) -> None:
        from rotate.clients.pushgateway import push

        grouping = {"credential": self._run.start.credential}
        self._outbox.put(Job(f"pushgateway ({shown_address(url)})",
                             functools.partial(push, url, run_metrics.JOB, grouping, samples)))


def _value_written_at(state: journal_mod.RunState, status: str) -> float | None:
    """When a succeeded rotation wrote the value (its backend.write step), as Unix time.  A
    rollback puts back an older value whose write time the run does not know: None."""
    if status != "succeeded" or state.operation != "rotate":
        return None
    wrote = [s for s in state.steps if s.status == "done" and (kind := find(s.step)) is not None
             and kind.writes_value]
    if not wrote or not wrote[0].finished_at:
        return None
    return parse_rfc3339(wrote[0].finished_at).timestamp()


def slack_document(document: Mapping[str, Any]) -> dict[str, str]:
    """A Slack incoming-webhook message: one ``text`` from rotate's document."""
    d = document
    head = f"rotate: {d['operation']} run {d['run_id']} of credential {d['credential']}"
    if d["event"] == "run.start":
        return {"text": f"{head} started"}
    if d["outcome"] == "succeeded":
        return {"text": f"{head} succeeded. State now: {d['state']}."}
    failed = f" at step {d['failed_step']}" if d.get("failed_step") else ""
    lines = [f"{head} {d['outcome']} (exit {d['exit_code']}){failed}.",
             f"State now: {d['state']}."]
    if d.get("resume"):
        lines.append(f"Next: `{d['resume']}`"
                     + (f" or `{d['rollback']}`" if d.get("rollback") else ""))
    return {"text": "\n".join(lines)}
