"""``rotate watch`` assembled: the observations of rotate.engine.watcher read through the
seams, kopf's Secret watch, the leader Lease, the child runs and the HTTP endpoints
(docs/in-cluster.md "The watcher").

Invariants: the backend is read for metadata only (versions, never a value); a Vault
adapter is built per look (an in-cluster login's token has a TTL shorter than a watcher's
life); an API server or backend that cannot be read makes the look a *wait*, never an
action.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rotate.chain.model import Chain
from rotate.clients.seams import Kube, Vault
from rotate.core.errors import ClientError, NotFoundError, RotateError
from rotate.engine.journal import RunState
from rotate.engine.leadership import Leadership, expired
from rotate.engine.lock import holder_gone_from_here, lease_name
from rotate.engine.unfinished import RunSource, latest_unfinished
from rotate.engine.watcher import LockState, Runner, Watcher, targets_of
from rotate.stages import backend


@dataclass(frozen=True)
class WatchSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    lease_seconds: int = 15
    resync: float = 300.0
    retry: float = 5.0


class ChainObserver:
    """rotate.engine.watcher.Observer over the cluster, the journals and the backend."""

    def __init__(self, chain: Chain, kube: Kube, vault: Callable[[], Vault],
                 runs: Callable[[], RunSource]) -> None:
        self._chain, self._kube, self._vault, self._runs = chain, kube, vault, runs

    def lock(self, credential: str) -> LockState:
        try:
            current = self._kube.get("Lease", self._chain.cluster.lock_namespace,
                                     lease_name(credential))
        except NotFoundError:
            return LockState(False, True)
        except ClientError:
            return LockState(True, False, "unknown: the API server could not be read")
        holder = str((current.get("spec") or {}).get("holderIdentity") or "")
        gone = holder_gone_from_here(current) is not None  # the rule a resume follows
        return LockState(True, expired(current) or gone, holder)

    def open_run(self, credential: str) -> RunState | None:
        return latest_unfinished(self._runs(), credential)

    def versions(self, credential: str) -> tuple[tuple[int, int] | None, str]:
        path = self._chain.credential(credential).backend.path
        try:
            meta = self._vault().read_metadata(path)
        except (ClientError, RotateError) as exc:
            return None, f"the backend's {path} could not be read ({exc.message})"
        written = meta.custom_metadata.get(backend.VERSION_META, "")
        if not written.isdigit():
            return None, (f"no rotate run ever wrote {path}: nothing the chain holds to "
                          "compare with")
        return (meta.current_version, int(written)), ""


def due_now(chain: Chain, credentials: Sequence[str], vault: Callable[[], Vault],
            runs: Callable[[], RunSource]) -> Callable[[], list[str]]:
    """What is due among ``credentials`` (all when empty), for the watcher's resync: not a
    credential whose value comes from stdin (a person's), nor one whose backend cannot be
    read."""
    from rotate.core.timestamps import utcnow
    from rotate.engine.due import due_credentials

    creds = [chain.credential(n) for n in dict.fromkeys(credentials)] or list(
        chain.credentials.values())

    def due() -> list[str]:
        try:
            found = due_credentials(chain, creds, vault(), runs(), utcnow())
        except (ClientError, RotateError):
            return []
        return [d.credential for d in found if d.due and not d.manual and not d.error]

    return due


def serve(chain: Chain, credentials: Sequence[str], kube: Kube, observer: ChainObserver,
          runner: Runner, settings: WatchSettings, stop: threading.Event,
          log: Callable[[str], None], due: Callable[[], Iterable[str]] | None = None) -> None:
    """Watch until ``stop``: endpoints up, Secret watch started, the loop run."""
    from rotate.clients.kube import KubeClient
    from rotate.clients.secret_watch import KopfSecretWatch
    from rotate.clients.watch_http import WatchHttp, WatchMetrics

    targets = targets_of(chain, credentials)
    metrics = WatchMetrics()
    leader = Leadership(kube, chain.cluster.lock_namespace, duration=settings.lease_seconds)
    watcher = Watcher(targets, observer, runner, leader, metrics, log, resync=settings.resync,
                      retry=settings.retry, due=due)
    if not isinstance(kube, KubeClient):
        raise TypeError("rotate watch needs the real Kubernetes client")
    secrets = KopfSecretWatch(kube, targets, watcher.changed)
    stale = max(30.0, settings.retry * 4)
    http = WatchHttp(settings.host, settings.port, metrics,
                     healthy=lambda: (watcher.acting or time.monotonic() - watcher.beat < stale)
                     and secrets.alive,
                     ready=lambda: secrets.ready)
    http.start()
    log(f"watching {len(targets)} Secret(s) of {len(watcher.credentials)} credential(s) as "
        f"{leader.holder}; endpoints on {settings.host}:{http.port}")
    secrets.start()
    try:
        watcher.run(stop)
    finally:
        secrets.stop()
        http.stop()
