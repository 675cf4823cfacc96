"""The lab's fault switches: ``DIR/faults.json``, read by every lab process.

``rotate lab fault`` rewrites the file atomically; the cluster process, the Config Center and
the sample services re-read it when it changes, so switching a fault needs no control
channel into any of them.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

FAULT_KINDS = (
    "eso-stall",
    "eso-error",
    "bao-down",
    "config-center-5xx",
    "crashloop",
    "readyz-fail",
    "provider-crashloop",
    "rotator-fail",
    "rotator-hang",
    "portforward-drop",
    # the API server drops every request for rotate's run journals (ConfigMaps rotate-run-*)
    "journal-unreachable",
    # listing workloads and ExternalSecrets in a namespace (TARGET; `*`: cluster-wide) is
    # forbidden to every caller, requests and SelfSubjectAccessReviews alike
    "list-forbidden",
)


class Faults:
    """Reads ``DIR/faults.json`` ({"kind": [targets] or true}) — re-read when it changes.

    Every lab process (cluster, Config Center, sample services) reads the same file, so
    ``rotate lab fault`` needs no control channel: it rewrites the file atomically.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: float | None = None
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        with self._lock:
            try:
                mtime = self.path.stat().st_mtime_ns
            except FileNotFoundError:
                self._mtime, self._data = None, {}
                return self._data
            if mtime != self._mtime:
                try:
                    self._data = json.loads(self.path.read_text() or "{}")
                except (OSError, ValueError):
                    return self._data
                self._mtime = mtime
            return self._data

    def active(self, kind: str, target: str | None = None) -> bool:
        value = self._load().get(kind)
        if not value:
            return False
        if value is True or target is None:
            return True
        return target in value

    @staticmethod
    def write(path: Path, data: dict[str, Any]) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
