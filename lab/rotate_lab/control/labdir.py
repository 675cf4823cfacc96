"""One lab's directory: every file by role, and which recorded processes are still ours.

Layout (``DIR`` defaults to ``./.rotate-lab``)::

    DIR/env, DIR/kubeconfig        what a user sources / points kubectl at (0600: tokens)
    DIR/lab.json                   profile, net octet, addresses of the parts
    DIR/pids.json                  {"cluster"|"kube_proxy"|"config_center"|"openbao": pid},
                                   and "prometheus"|"pushgateway" when started (--with)
    DIR/kube-proxy.port            kube-proxy's /healthz port (written once it listens)
    DIR/pods.json                  {"ns/pod": pid} — written by the kubelet
    DIR/faults.json                active faults (rotate_lab.cluster.context.Faults)
    DIR/cluster.json               the cluster process's configuration (0600: tokens)
    DIR/secrets/                   API and Config Center admin tokens (0700, files 0600)
    DIR/runtime.json               {"dir": "/tmp/rotate-lab-…"}: a root lab's runtime directory
                                   (rotate_lab.host.runtime_dir), removed by ``down``
    DIR/tls/, DIR/openbao/, DIR/configcenter/, DIR/state/, DIR/logs/<part>.log
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rotate_lab.host import processes, runtime_dir
from rotate_lab.host.processes import Recorded

#: order matters for ``down``'s output: the cluster first (it stops its pods)
PARTS = ("cluster", "kube_proxy", "config_center", "openbao")
#: parts started only when asked (``up --with``) that run as processes of their own,
#: recorded in ``pids.json`` beside :data:`PARTS` and stopped first
OPTIONAL_PARTS = ("prometheus", "pushgateway")


@dataclass(frozen=True)
class LabDir:
    """Every file of one lab, by role (see module docstring)."""

    root: Path

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    def log(self, part: str) -> Path:
        return self.logs / f"{part}.log"

    def secret(self, name: str) -> Path:
        return self.secrets / name

    def read_secret(self, name: str) -> str:
        return self.secret(name).read_text().strip()

    def write_secret(self, name: str, value: str) -> Path:
        path = self.secret(name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(value + "\n")
        return path

    def meta(self) -> dict[str, Any]:
        data = processes.read_json(self / "lab.json")
        return data if isinstance(data, dict) else {}

    def nice(self) -> int:
        """The niceness ``up`` started the lab at (``lab.json``; 0 for a lab from before it)."""
        value = self.meta().get("nice")
        return value if isinstance(value, int) else 0

    def recorded(self) -> list[Recorded]:
        """The detached parts, in stop order; marker = the lab dir in their cmdline."""
        pids = processes.read_json(self / "pids.json")
        if not isinstance(pids, dict):
            return []
        return [Recorded(p, int(pids[p]), str(self.root)) for p in (*OPTIONAL_PARTS, *PARTS)
                if isinstance(pids.get(p), int)]

    def pods(self) -> list[Recorded]:
        """Pod processes the kubelet recorded in ``DIR/pods.json`` ({"ns/pod": pid, …}); a
        pod's files may name the runtime directory instead of the lab's."""
        data = processes.read_json(self / "pods.json")
        if not isinstance(data, dict):
            return []
        runtime = runtime_dir.recorded(self.root)
        also = (str(runtime),) if runtime is not None else ()
        return [Recorded(f"pod {k}", v, str(self.root), also) for k, v in data.items()
                if isinstance(v, int) and not isinstance(v, bool) and v > 1]


def running(d: LabDir) -> tuple[list[Recorded], list[Recorded]]:
    """(recorded parts still ours, all recorded parts)."""
    recs = d.recorded()
    return [r for r in recs if processes.ours(r)], recs
