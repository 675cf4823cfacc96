"""Stage ④ readyz: every consumer answers 200 on its readiness endpoint before the deadline.

A rollout being "complete" means the pods passed their readiness probes; readyz through
the service is the end-to-end proof that the consumer really works with the new value
(for the sample services: a fresh AUTH+PING to Dragonfly and a valid machine token).
"""

from __future__ import annotations

from rotate.chain.model import Service
from rotate.clients.seams import Readyz, ReadyzTarget
from rotate.core.waiting import CancelToken, Deadline, wait_for


def target_for(service: Service) -> ReadyzTarget:
    cfg = service.readyz
    if cfg.url:
        return ReadyzTarget(service.namespace, cfg.service or service.name, cfg.port or "",
                            cfg.path, url=cfg.url)
    return ReadyzTarget(service.namespace, cfg.service or service.name,
                        cfg.port if cfg.port is not None else "http", cfg.path)


def wait_ready(
    readyz: Readyz, target: ReadyzTarget, *, deadline: Deadline, cancel: CancelToken | None = None
) -> str:
    last = ["no answer yet"]

    def check() -> str | None:
        status = readyz.status(target)
        last[0] = f"HTTP {status}"
        return f"{target} answered 200" if status == 200 else None

    return wait_for(check, deadline=deadline, what=f"readyz {target}",
                    describe=lambda: last[0], cancel=cancel)
