"""Steady open-loop load on every service's ``/work``, addressed by ClusterIP:port.

Invariants:

- Open loop: request *k* of a service is sent at ``start + k / rps`` whether or not earlier
  ones answered (a slow service does not lower its own load); a bounded pool of worker
  threads sends them, so a hung service costs at most ``timeout`` per request.
- Bounded: at most ``rps × max_seconds`` requests per service, and ``stop()`` ends it sooner.
- A request is *ok* only on HTTP 200; a refused connection, a timeout or any other status
  is a failure, recorded with the time it was sent.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from bench.analysis import Sample
from bench.world import Target


def work_once(target: Target, timeout: float) -> bool:
    conn = http.client.HTTPConnection(target.ip, target.port, timeout=timeout)
    try:
        conn.request("GET", "/work", headers={"Host": target.fqdn})
        resp = conn.getresponse()
        resp.read()
        return resp.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class Load:
    def __init__(self, targets: Sequence[Target], rps: float, max_seconds: float,
                 timeout: float = 2.0) -> None:
        self.targets, self.rps, self.max_seconds, self.timeout = targets, rps, max_seconds, timeout
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        workers = max(8, min(64, int(len(targets) * rps * timeout / 4) + 4))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="load")
        self._ticker = threading.Thread(target=self._tick, daemon=True, name="load-ticker")

    def start(self) -> Load:
        self._ticker.start()
        return self

    def _one(self, target: Target, sent: float) -> None:
        ok = work_once(target, self.timeout)
        sample = Sample(target.name, sent, ok, time.time() - sent)
        with self._lock:
            self.samples.append(sample)

    def _tick(self) -> None:
        start = time.time()
        period = 1.0 / self.rps
        total = int(self.rps * self.max_seconds)
        for k in range(total):
            due = start + k * period
            if self._stop.wait(max(0.0, due - time.time())):
                return
            for target in self.targets:
                self._pool.submit(self._one, target, time.time())

    def stop(self) -> list[Sample]:
        """Stop sending; wait for the requests in flight; return every sample, by time."""
        self._stop.set()
        self._ticker.join(timeout=self.timeout + 1.0)
        self._pool.shutdown(wait=True)
        with self._lock:
            return sorted(self.samples, key=lambda s: s.sent)
