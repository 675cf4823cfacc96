"""Container probes as the kubelet runs them: httpGet, tcpSocket, exec.

A :class:`Probe` holds one probe's spec and state.  Timing follows the pod spec except that
the period is capped by the lab profile (``min(periodSeconds, profile.readiness_period)``), so
the fast profile reacts within a fraction of a second.  Thresholds are upstream's: ``ready``
turns True after ``successThreshold`` consecutive successes and False after
``failureThreshold`` consecutive failures; a fresh container starts not ready.  httpGet counts
200–399 as success, sends the kubelet's ``User-Agent: kube-probe/1.32`` and, like the kubelet,
does not verify HTTPS certificates; exec runs the
command as given (no shell unless the command is one) with the container's environment.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

#: what a real kubelet sends (``kube-probe/<major>.<minor>``); services may recognise it
PROBE_USER_AGENT = "kube-probe/1.32"


def container_port(container: Obj, value: Any) -> int:
    """A probe/Service port: a number, or the name of one of the container's ports."""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p["containerPort"])
    raise ValueError(f"no container port named {value!r}")


class Probe:
    def __init__(self, spec: Obj, period_cap: float) -> None:
        self.spec = spec
        self.period = min(float(spec.get("periodSeconds") or 10), period_cap)
        self.initial = float(spec.get("initialDelaySeconds") or 0)
        self.timeout = float(spec.get("timeoutSeconds") or 1)
        self.success_threshold = int(spec.get("successThreshold") or 1)
        self.failure_threshold = int(spec.get("failureThreshold") or 3)
        self.reset(0.0)

    def reset(self, started: float) -> None:
        self.ready = False
        self.successes = self.failures = 0
        self.next_at = started + self.initial

    def record(self, ok: bool, now: float) -> None:
        self.next_at = now + self.period
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.success_threshold:
                self.ready = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= self.failure_threshold:
                self.ready = False

    def run(self, container: Obj, pod_ip: str, env: dict[str, str], cwd: Path) -> bool:
        """One probe attempt; any error is a failure."""
        spec, timeout = self.spec, self.timeout
        try:
            if "httpGet" in spec:
                h = spec["httpGet"]
                host = str(h.get("host") or pod_ip)
                port = container_port(container, h.get("port"))
                conn: http.client.HTTPConnection
                if str(h.get("scheme", "HTTP")).upper() == "HTTPS":
                    conn = http.client.HTTPSConnection(
                        host, port, timeout=timeout, context=ssl._create_unverified_context())
                else:
                    conn = http.client.HTTPConnection(host, port, timeout=timeout)
                try:
                    headers = {"User-Agent": PROBE_USER_AGENT, **{
                        str(x.get("name")): str(x.get("value"))
                        for x in h.get("httpHeaders") or []}}
                    conn.request("GET", str(h.get("path") or "/"), headers=headers)
                    status = conn.getresponse().status
                finally:
                    conn.close()
                return 200 <= status < 400
            if "tcpSocket" in spec:
                t = spec["tcpSocket"]
                with socket.create_connection(
                        (str(t.get("host") or pod_ip), container_port(container, t.get("port"))),
                        timeout=timeout):
                    return True
            if "exec" in spec:
                argv = [str(a) for a in (spec["exec"].get("command") or [])]
                done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True,
                                      timeout=timeout, check=False)
                return done.returncode == 0
        except (OSError, ValueError, http.client.HTTPException, subprocess.SubprocessError):
            return False
        return False
