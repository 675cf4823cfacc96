"""rotate's own cost at scale: its overhead and its API requests.

- *Waiting on the world* is the union of the journaled steps that only wait for another
  system to act: ``sync.wait`` (ESO), ``provider.wait`` / ``consumer.wait`` (rollouts),
  ``readyz.check``, and ``consumer.restart``, which under the restart strategy waits for the
  new pods to start before the provider switches (its patch is one request).  *Overhead*
  is the wall time minus that union: start-up and plan, the
  requests rotate makes itself (writes, patches, mints, revokes), and its exit.  Start-up
  (the command's start to its first journal record) is shown on its own.
- *API requests* are counted by the lab's API server (``GET /lab/api-requests``, by
  client, verb and resource); the difference of the ``rotate`` client's counts around one
  run, divided by the number of consumers, is what one more consumer costs the API server.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.analysis import busy_time
from bench.measure import Segment
from bench.world import BenchError, Lab

WAIT_KINDS = frozenset({"sync.wait", "provider.wait", "consumer.restart", "consumer.wait",
                        "readyz.check"})
CLIENT = "rotate"
COUNTS_PATH = "/lab/api-requests"


@dataclass(frozen=True)
class Overhead:
    wall: float
    waiting: float
    startup: float

    @property
    def own(self) -> float:
        return self.wall - self.waiting


def overhead_of(seg: Segment) -> Overhead:
    waits = [(s.start, s.end) for s in seg.steps if s.kind in WAIT_KINDS]
    startup = sum(s.end - s.start for s in seg.steps if s.kind == "start-up+plan")
    return Overhead(seg.wall, busy_time(waits), startup)


def api_counts(lab: Lab) -> dict[str, int]:
    """The ``rotate`` client's requests so far, as ``verb resource`` → count."""
    try:
        done = subprocess.run(["kubectl", "get", "--raw", COUNTS_PATH], capture_output=True,
                              text=True, timeout=30.0, check=False, env=lab.env)
    except subprocess.TimeoutExpired:
        raise BenchError(f"kubectl get --raw {COUNTS_PATH} did not answer within 30s") from None
    if done.returncode != 0:
        raise BenchError(f"the lab's API server does not count requests ({COUNTS_PATH}): "
                         f"{done.stderr.strip()}")
    doc = json.loads(done.stdout)
    return {f"{r['verb']} {r['resource']}": int(r["count"])
            for r in doc.get("requests") or [] if r.get("client") == CLIENT}


def difference(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in sorted(after)
            if after[k] - before.get(k, 0) > 0}


def render(overheads: Sequence[Overhead], requests: Sequence[Mapping[str, int]],
           consumers: int) -> str:
    """Lines for the report: per rotate run, overhead and requests per consumer."""
    lines = []
    for i, (o, r) in enumerate(zip(overheads, requests, strict=False)):
        total = sum(r.values())
        watches = sum(n for k, n in r.items() if k.startswith("watch "))
        lines.append(
            f"rotate run {i + 1}: wall {o.wall:.2f} s = waiting on the world {o.waiting:.2f} s "
            f"+ rotate's own {o.own:.2f} s (start-up+plan {o.startup:.2f} s); API requests "
            f"{total} ({watches} watches) = {total / max(consumers, 1):.1f} per consumer")
    if requests:
        top = sorted(requests[-1].items(), key=lambda kv: -kv[1])[:8]
        lines.append("requests of the last run by verb and resource: "
                     + ", ".join(f"{k} {n}" for k, n in top))
    return "\n".join(lines)
