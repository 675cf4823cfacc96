"""The metrics a run pushes to a Prometheus Pushgateway, as plain samples.

Grouping key: ``job="rotate"``, ``credential=<name>`` — one group per credential, so the
gateway holds each credential's latest figures.  Pushed with ``pushadd``: a metric not
pushed by this run keeps the value an earlier run pushed (a failed run leaves
``rotate_last_success_timestamp_seconds`` alone).  No sample holds a value or a fingerprint
of one: names, numbers, run ids and step names only.

The alert rules (``deploy/prometheus/rotate-alerts.yaml``) and docs/notifications.md
describe each metric; a name changed here must change there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rotate.clients.pushgateway import Sample

JOB = "rotate"

RUN_SUCCESS = "rotate_last_run_success"
RUN_INFO = "rotate_last_run_info"
RUN_DURATION = "rotate_last_run_duration_seconds"
RUN_END = "rotate_last_run_timestamp_seconds"
STAGE_DURATION = "rotate_last_run_stage_duration_seconds"
FAILED_STEPS = "rotate_last_run_failed_steps"
LAST_SUCCESS = "rotate_last_success_timestamp_seconds"
VALUE_WRITTEN = "rotate_value_written_timestamp_seconds"
VALUE_AGE = "rotate_value_age_seconds"
MAX_AGE = "rotate_max_age_seconds"
#: 1 when every link of the credential's chain is proven on the backend's current value, 0
#: otherwise.  Pushed by ``rotate status`` (rotate.engine.status.push_closed: the command that
#: observes the chain outside a run) when a Pushgateway is configured.
CHAIN_CLOSED = "rotate_chain_closed"
CHAIN_CLOSED_HELP = ("1 when rotate status found every link of the credential's chain closed, "
                     "0 otherwise.")
MAX_AGE_HELP = "The age the credential's value must not exceed (maxAge)."


@dataclass(frozen=True)
class RunOutcome:
    """What one run (or one resumed part of it) ends with."""

    run_id: str
    operation: str
    status: str  # the run.end status: succeeded, failed, interrupted, rollback-failed
    seconds: float  # the steps this process ran, first start to end
    ended_at: float  # Unix time
    stage_seconds: Mapping[int, float]  # stage → its steps' span (first start to last end)
    failed_steps: Sequence[str]  # "7 consumer.wait shop/cart"
    value_written_at: float | None  # Unix time of the backend write a succeeded rotation made
    max_age: float | None  # the credential's maxAge, else notify.maxAge


def samples(outcome: RunOutcome) -> list[Sample]:
    """The run's samples, in a fixed order."""
    o = outcome
    ok = o.status == "succeeded"
    out = [
        Sample(RUN_SUCCESS, "1 when the credential's last run succeeded, 0 otherwise.",
               1.0 if ok else 0.0, (("operation", o.operation),)),
        Sample(RUN_INFO, "The credential's last run: its id, operation, status, failed step.",
               1.0, (("run_id", o.run_id), ("operation", o.operation), ("status", o.status),
                     ("failed_step", o.failed_steps[0] if o.failed_steps else ""))),
        Sample(RUN_DURATION, "Seconds the last run's steps took (preflight excluded).",
               o.seconds),
        Sample(RUN_END, "Unix time the last run ended.", o.ended_at),
        Sample(FAILED_STEPS, "Steps of the last run that failed.", float(len(o.failed_steps))),
    ]
    out += [Sample(STAGE_DURATION, "Seconds each stage of the last run took.", seconds,
                   (("stage", str(stage)),))
            for stage, seconds in sorted(o.stage_seconds.items())]
    if ok:
        out.append(Sample(LAST_SUCCESS, "Unix time of the credential's last successful run.",
                          o.ended_at))
    if o.value_written_at is not None:
        out += [
            Sample(VALUE_WRITTEN, "Unix time the credential's current value was written.",
                   o.value_written_at),
            Sample(VALUE_AGE, "Age of the credential's value when the run pushed (alert on "
                              "time() - rotate_value_written_timestamp_seconds instead).",
                   max(0.0, o.ended_at - o.value_written_at)),
        ]
    if o.max_age is not None:
        out.append(Sample(MAX_AGE, MAX_AGE_HELP, o.max_age))
    return out
