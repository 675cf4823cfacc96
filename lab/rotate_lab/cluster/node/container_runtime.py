"""One container of a pod: its process, restarts with back-off, and its probes (readiness,
liveness, startup), run by the pod's thread (:class:`~.pod_runtime.PodRuntime`).

Invariants, and why:

- Only the pod's thread calls :meth:`ContainerRuntime.step`; no lock is needed, and the
  container's state (waiting, running, terminated, restart count) changes in one place.
- A container that fails to start (an unknown image, a missing Secret or ConfigMap) waits
  with the reason Kubernetes gives (``ErrImagePull``, ``CreateContainerConfigError``) and
  retries with back-off; its Event is recorded once (the first pull failure, a new config
  error), not once a tick.
- A failed liveness probe sends SIGTERM, then SIGKILL after :data:`GRACE`, and counts as a
  restart; a container that exited for good (``restartPolicy`` Never, or OnFailure with
  exit 0) is never restarted.
- It reaches its pod only through :class:`Pod`, so this module never imports
  :mod:`.pod_runtime` (no cycle between the two).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Protocol

from rotate_lab.cluster.node.containers import (
    ConfigError,
    Launch,
    UnknownImage,
    container_env,
    volume_mounts,
)
from rotate_lab.cluster.node.images import launch_for
from rotate_lab.cluster.node.incluster import (
    SERVICEACCOUNT_PATH,
    automounts,
    is_rotate_image,
    mount_service_account,
    rotate_launch,
)
from rotate_lab.cluster.node.probes import Probe
from rotate_lab.host import priority

if TYPE_CHECKING:
    import logging
    from pathlib import Path

    from rotate_lab.cluster.api.store import Store
    from rotate_lab.cluster.context import LabContext

Obj = dict[str, Any]

GRACE = 2.0  # SIGTERM → SIGKILL; short, pods here are local processes
#: A liveness failure kills the container, so its period is capped less hard than
#: readiness': with the fast profile's 0.2 s, three failures would kill a pod still starting
#: (Python start-up, bootstrap fetch) within 0.6 s on a loaded machine — a crash loop no real
#: cluster has (there, 3 x 5 s).  1 s keeps a hung container's restart within seconds.
LIVENESS_PERIOD_FLOOR = 1.0


class Node(Protocol):
    """What a pod's runtime needs from its kubelet (:class:`~.kubelet.Kubelet`)."""

    @property
    def ctx(self) -> LabContext: ...

    @property
    def log(self) -> logging.Logger: ...

    def record_pid(self, key: str, pid: int | None, *, exited: int | None = None) -> None: ...

    def pod_dir(self, ns: str, name: str) -> Path: ...

    def log_file(self, ns: str, name: str) -> Path: ...

    def now(self) -> str: ...


class Pod(Protocol):
    """What a container needs of its pod (:class:`~.pod_runtime.PodRuntime`)."""

    @property
    def kubelet(self) -> Node: ...
    @property
    def store(self) -> Store: ...
    @property
    def current(self) -> Obj: ...
    @property
    def ns(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def ip(self) -> str: ...
    @property
    def dir(self) -> Path: ...
    @property
    def lab_dir(self) -> Path: ...
    @property
    def base_env(self) -> dict[str, str]: ...
    @property
    def period_cap(self) -> float: ...
    @property
    def backoff_base(self) -> float: ...
    @property
    def restart_policy(self) -> str: ...
    @property
    def service_name(self) -> str: ...
    @property
    def containers(self) -> Sequence[ContainerRuntime]: ...
    def crashing(self) -> bool: ...
    def event(self, reason: str, message: str, type: str = "Normal") -> None: ...
    def open_log(self) -> IO[bytes]: ...


CRASH_ARGV = ["/bin/sh", "-c", "echo 'lab fault: container exits at start (crashloop)' >&2; "
              "exit 1"]


class ContainerRuntime:
    def __init__(self, pod: Pod, spec: Obj) -> None:
        self.pod = pod
        self.spec = spec
        self.name = str(spec.get("name") or "main")
        self.image = str(spec.get("image") or "")
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.restart_count = 0
        self.ever_started = False
        self.started_at = ""
        self.waiting: tuple[str, str] = ("ContainerCreating", "")
        self.last_state: Obj = {}
        self.next_start = 0.0
        self.backoff = pod.backoff_base
        self.run_since = 0.0
        self.image_failures = 0
        probe = spec.get("readinessProbe")
        self.probe = Probe(probe, pod.period_cap) if isinstance(probe, dict) else None
        live = spec.get("livenessProbe")
        self.liveness = (Probe(live, max(pod.period_cap, LIVENESS_PERIOD_FLOOR))
                         if isinstance(live, dict) else None)
        boot = spec.get("startupProbe")
        self.startup = Probe(boot, pod.period_cap) if isinstance(boot, dict) else None
        #: the startup probe succeeded since the container (re)started
        self.startup_passed = False
        self.kill_at: float | None = None  # liveness failed: SIGKILL if still alive then
        #: exited for good (restartPolicy Never, or OnFailure with exit 0): never restarted
        self.terminated: Obj | None = None

    @property
    def pid_key(self) -> str:
        base = f"{self.pod.ns}/{self.pod.name}"
        return base if self.pod.containers[0] is self else f"{base}/{self.name}"

    @property
    def started(self) -> bool:
        """containerStatuses[].started: running, and its startup probe (if any) passed."""
        return self.proc is not None and (self.startup is None or self.startup_passed)

    @property
    def ready(self) -> bool:
        if not self.started:
            return False
        return True if self.probe is None else self.probe.ready

    def step(self, now: float) -> None:
        if self.terminated is not None:
            return
        if self.proc is None:
            if now >= self.next_start:
                self._start(now)
        elif self.proc.poll() is not None:
            self._exited(now)
        else:
            self._check_probes(now)

    def _check_probes(self, now: float) -> None:
        if self.kill_at is not None:
            if now >= self.kill_at:
                self.kill(signal.SIGKILL)
            return
        if not self.started:
            self._check_startup(now)
            return
        if self.probe is not None and now >= self.probe.next_at:
            was_ready = self.probe.ready
            self.probe.record(self._probe(self.probe), time.monotonic())
            if was_ready and not self.probe.ready:
                self.pod.event("Unhealthy", f"Readiness probe of container {self.name} failed",
                               "Warning")
        live = self.liveness
        if live is not None and now >= live.next_at:
            live.record(self._probe(live), time.monotonic())
            if live.failures >= live.failure_threshold:
                # As the kubelet does: a failed liveness probe restarts the container.
                with self.pod.open_log() as log:
                    log.write(f"--- lab kubelet: container {self.name} failed liveness probe, "
                              "will be restarted\n".encode())
                self.pod.event("Killing", f"Container {self.name} failed liveness probe, "
                               "will be restarted")
                self.kill(signal.SIGTERM)
                self.kill_at = now + GRACE

    def _check_startup(self, now: float) -> None:
        """As the kubelet: readiness and liveness wait for the startup probe; it failing
        ``failureThreshold`` times in a row restarts the container.  The lab caps the probe's
        period (the profile), so the failure count is scaled to keep the spec's time budget
        (``periodSeconds`` x ``failureThreshold``) — a slow start is not killed sooner."""
        boot = self.startup
        if boot is None or now < boot.next_at:
            return
        boot.record(self._probe(boot), time.monotonic())
        if boot.ready:
            self.startup_passed = True
            return
        spec_period = float(boot.spec.get("periodSeconds") or 10)
        budget = boot.failure_threshold * max(1, round(spec_period / boot.period))
        if boot.failures >= budget:
            with self.pod.open_log() as log:
                log.write(f"--- lab kubelet: container {self.name} failed startup probe, "
                          "will be restarted\n".encode())
            self.pod.event("Unhealthy", f"Startup probe of container {self.name} failed",
                           "Warning")
            self.pod.event("Killing", f"Container {self.name} failed startup probe, will be "
                           "restarted")
            self.kill(signal.SIGTERM)
            self.kill_at = now + GRACE

    def _start(self, now: float) -> None:
        pod = self.pod
        if pod.crashing():
            launch = Launch(list(CRASH_ARGV), dict(pod.base_env), None, "crash")
        else:
            try:
                self.env = container_env(pod.store, pod.current, self.spec)
                launch = self._launch()
            except UnknownImage as exc:
                self.image_failures += 1
                if self.image_failures == 1:
                    self.pod.event("Failed", f"Failed to pull image \"{self.image}\": {exc}",
                                   "Warning")
                self.waiting = (("ErrImagePull", str(exc)) if self.image_failures == 1 else
                                ("ImagePullBackOff", f'Back-off pulling image "{self.image}"'))
                self.next_start = now + min(self.backoff * 2 ** self.image_failures, 30.0)
                return
            except ConfigError as exc:
                if self.waiting != ("CreateContainerConfigError", str(exc)):
                    self.pod.event("Failed", f"Error: {exc}", "Warning")
                self.waiting = ("CreateContainerConfigError", str(exc))
                self.next_start = now + 0.5
                return
        log = pod.open_log()
        try:
            log.write(f"--- lab kubelet: starting container {self.name} "
                      f"({launch.program or self.image})\n".encode())
            for note in launch.notes:
                log.write(f"--- lab kubelet: {note}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                launch.argv, env=launch.env, cwd=pod.dir, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if launch.stdin is not None else subprocess.DEVNULL,
                start_new_session=True)
            # the pod's own session: as lab-yielding as this kubelet thread (host/priority.py)
            priority.set_session(proc.pid, priority.current())
        except OSError as exc:
            self.waiting = ("RunContainerError", f"cannot start {launch.argv[0]}: "
                            f"{exc.strerror or 'error'}")
            self.next_start = now + self.backoff
            return
        finally:
            log.close()
        if launch.stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(launch.stdin)
                proc.stdin.close()
            except OSError:
                pass
        if self.ever_started:
            self.restart_count += 1
        self.ever_started = True
        self.proc = proc
        self.started_at = pod.kubelet.now()
        self.run_since = now
        self.kill_at = None
        self.startup_passed = False
        for probe in (self.probe, self.liveness, self.startup):
            if probe is not None:
                probe.reset(time.monotonic())
        pod.kubelet.record_pid(self.pid_key, proc.pid)
        pod.event("Started", f"Started container {self.name}")

    def _launch(self) -> Launch:
        """The process for this container: its image's program, the API server's address in
        the environment and, unless disabled, the ServiceAccount token mounted."""
        pod = self.pod
        mounts = volume_mounts(pod.current, self.spec, pod.dir, pod.lab_dir)
        ctx = pod.kubelet.ctx
        base_env = dict(pod.base_env)
        sa_dir = None
        if ctx.api is not None:
            base_env.update(ctx.api.env())
            if ctx.tokens is not None and automounts(pod.current, pod.store):
                sa_dir = mount_service_account(pod.current, pod.store, ctx.tokens, ctx.api,
                                               pod.dir)
                mounts.setdefault(SERVICEACCOUNT_PATH, sa_dir)
        if is_rotate_image(self.image):
            return rotate_launch(self.spec, self.env, base_env=base_env, mounts=mounts,
                                 sa_dir=sa_dir)
        return launch_for(self.spec, self.env, pod_ip=pod.ip, pod_dir=pod.dir,
                          service_name=pod.service_name, lab_dir=pod.lab_dir,
                          base_env=base_env, mounts=mounts, runtime_dir=ctx.runtime_dir)

    def _exited(self, now: float) -> None:
        assert self.proc is not None
        code = self.proc.returncode
        pod = self.pod
        pod.kubelet.record_pid(self.pid_key, None, exited=self.proc.pid)
        self.last_state = {"terminated": {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.started_at, "finishedAt": pod.kubelet.now(),
            "containerID": f"lab://{self.proc.pid}"}}
        self.proc = None
        policy = pod.restart_policy
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            self.terminated, self.last_state = self.last_state["terminated"], {}
            pod.event("Completed" if code == 0 else "Failed",
                      f"Container {self.name} exited with code {code}",
                      "Normal" if code == 0 else "Warning")
            return
        if now - self.run_since > 60 * pod.backoff_base:
            self.backoff = pod.backoff_base  # ran long enough: forget earlier crashes
        self.next_start = now + self.backoff
        self.waiting = ("CrashLoopBackOff",
                        f"back-off {self.backoff:g}s restarting failed container={self.name} "
                        f"pod={pod.name}_{pod.ns}({pod.uid})")
        self.backoff = min(self.backoff * 2, 30 * pod.backoff_base)
        pod.event("BackOff", f"Back-off restarting failed container {self.name} in pod "
                  f"{pod.name}_{pod.ns}({pod.uid})", "Warning")

    def _probe(self, probe: Probe) -> bool:
        return probe.run(self.spec, self.pod.ip, {**self.pod.base_env, **self.env}, self.pod.dir)

    def kill(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def status(self) -> Obj:
        state: Obj
        if self.terminated is not None:
            state = {"terminated": dict(self.terminated)}
        elif self.proc is not None:
            state = {"running": {"startedAt": self.started_at}}
        else:
            reason, message = self.waiting
            state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        out: Obj = {"name": self.name, "image": self.image, "imageID": "",
                    "ready": self.ready, "started": self.started,
                    "restartCount": self.restart_count, "state": state,
                    "lastState": self.last_state}
        if self.proc is not None:
            out["containerID"] = f"lab://{self.proc.pid}"
        return out
