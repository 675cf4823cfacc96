"""What a restart-strategy run spends before its consumers' new pods exist, from the world's
own timings.

The critical path counts each consumer's new pod from *created* to started; what comes before
is in rotate's wall only: its start-up and plan, the preparation (mints, harvest, document
writes), then its patch and the lab's Deployment and ReplicaSet controllers' reaction, until
the pod exists.  This module splits that time per run, so the gap between the wall and the
critical path is attributed, not guessed:

- ``first_restart``: the command's start → the first ``consumer.restart`` step's start;
- ``reactions``: per consumer, its ``consumer.restart`` step's start (one GET, then the
  patch) → its new pod created, as the harness's pod watch saw it;
- the *last-started* pod (the one the provider's switch waited for): its consumer, its
  reaction, and when it was created, counted from the command's start.

Pure: it reads a :class:`~bench.measure.Segment` and the chain's consumers.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure import Segment
from bench.observed import newest_pod

RESTART = "consumer.restart"


@dataclass(frozen=True)
class Reaction:
    first_restart: float
    reactions: tuple[float, ...]
    #: (consumer, its reaction, its pod's creation counted from the command's start)
    last_started: tuple[str, float, float] | None


def reaction_of(seg: Segment, consumers: Sequence[str]) -> Reaction | None:
    """The split above for one run; None when no consumer.restart step was journaled."""
    begun = {"/".join(s.target.split("/")[-2:]): s.start  # deployment/NS/NAME → NS/NAME
             for s in seg.steps if s.kind == RESTART}
    if not begun:
        return None
    found: list[tuple[str, float, float, float]] = []  # consumer, reaction, created, started
    for consumer in consumers:
        ns, app = consumer.split("/", 1)
        pod = newest_pod(seg.pods, ns, app, seg.started)
        if consumer in begun and pod is not None and pod.created is not None:
            found.append((consumer, pod.created - begun[consumer], pod.created,
                          pod.started if pod.started is not None else float("-inf")))
    last = max(found, key=lambda f: f[3], default=None)
    return Reaction(
        min(begun.values()) - seg.started, tuple(f[1] for f in found),
        (last[0], last[1], last[2] - seg.started) if last is not None else None)


def render(reactions: Sequence[Reaction | None]) -> str:
    """One line per run: when the restarts began, and the controllers' reaction."""
    lines = []
    for i, r in enumerate(reactions, start=1):
        if r is None or not r.reactions:
            continue
        line = (f"rotate run {i}: first consumer.restart {r.first_restart:.2f} s after the "
                f"command started; its step's start → the new pod created (the patch and the "
                f"lab's controllers): median {statistics.median(r.reactions):.2f} s, max "
                f"{max(r.reactions):.2f} s")
        if r.last_started is not None:
            name, reaction, created = r.last_started
            line += (f"; the last pod to start ({name}) was created {created:.2f} s after "
                     f"the command started ({reaction:.2f} s after its restart began)")
        lines.append(line)
    return "\n".join(lines)
