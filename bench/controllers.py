"""The lab's controllers, timed: every Deployment of a namespace restarted at once, as rotate's
lanes restart the consumers, and each one's patch → its new pod; idle, or under the rotation
benchmark's load.

``python -m bench.controllers --dir LAB [--rps 20]`` on a running lab (``rotate lab up``).

Why: the critical path counts a consumer's new pod from its creation, so the time between a
restart's patch and the pod existing — the API server, then the Deployment and ReplicaSet
controllers — is in rotate's wall and not in the critical path (docs/performance.md).  On a
real cluster that is milliseconds; this measures what the lab takes with nothing of rotate
running.

The patches are shaped like rotate's restart (a merge patch of one pod-template annotation,
:data:`ANNOTATION`, sent at once from one thread per Deployment through rotate's Kubernetes
client); each new pod is the first
pod of the Deployment's ``app`` label that a ``kubectl`` watch sees ADDED after its patch
returned.  Both are times on this process's clock.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.load import Load
from bench.world import BenchError, Event, Lab, Watcher, load_targets

SETTLE = 20.0  # seconds the new pods get to appear
ANNOTATION = "bench.rotate.dev/restartedAt"


def reactions(patched: Mapping[str, float], pods: Sequence[Event]) -> dict[str, float]:
    """Per Deployment: its patch's return → the first pod of its ``app`` ADDED after it."""
    out: dict[str, float] = {}
    for ev in pods:
        md = ev.obj.get("metadata") or {}
        app = str((md.get("labels") or {}).get("app", ""))
        if ev.type == "ADDED" and app in patched and app not in out and ev.at >= patched[app]:
            out[app] = ev.at - patched[app]
    return out


def _spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return (f"median {statistics.median(ordered):.3f} s, max {ordered[-1]:.3f} s "
            f"({' '.join(f'{v:.3f}' for v in ordered)})")


def render(found: Mapping[str, float], round_trips: Sequence[float], expected: int,
           rps: float) -> str:
    head = (f"{expected} Deployments patched at once"
            f"{f', the load at {rps:g} req/s on every service' if rps else ', no load'}")
    if not found:
        return f"{head}: no new pod seen"
    return (f"{head}: the PATCH round trip {_spread(round_trips)}; its return → the new pod "
            f"({len(found)} of {expected} seen) {_spread(list(found.values()))}")


def measure(lab: Lab, namespace: str, rps: float) -> str:
    from rotate.clients.kube import KubeClient

    kube = KubeClient(lab.env.get("KUBECONFIG"))
    names = [str(d["metadata"]["name"]) for d in kube.list("Deployment", namespace)]
    load = Load(load_targets(lab, namespace), rps, 120).start() if rps else None
    pods = Watcher(lab, "pods")
    patched: dict[str, float] = {}
    trips: list[float] = []

    def patch(name: str) -> None:
        body = {"spec": {"template": {"metadata": {"annotations": {
            ANNOTATION: f"{time.time():.6f}"}}}}}
        sent = time.time()
        kube.patch("Deployment", namespace, name, body)
        patched[name] = time.time()
        trips.append(patched[name] - sent)

    try:
        time.sleep(3.0)  # the watch's initial list in, the load's baseline on
        with ThreadPoolExecutor(max_workers=len(names) or 1) as pool:
            list(pool.map(patch, names))
        deadline = time.time() + SETTLE
        while time.time() < deadline and len(reactions(patched, pods.events)) < len(names):
            time.sleep(0.2)
    finally:
        if load is not None:
            load.stop()
        events = pods.stop()
        kube.close()
    return render(reactions(patched, events), trips, len(names), rps)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.controllers",
                                 description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dir", type=Path, required=True, help="directory of a running lab")
    ap.add_argument("--namespace", default="shop", help="whose Deployments (default shop)")
    ap.add_argument("--rps", type=float, default=0.0,
                    help="requests per second on each service's /work meanwhile (default 0)")
    args = ap.parse_args(argv)
    lab = Lab(args.dir)
    try:
        lab.borrow()
        print(measure(lab, args.namespace, args.rps))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
