"""One rotate command as a child process of ``rotate watch`` (rotate.engine.watcher).

Why a child and not a call: the run gets exactly the CLI's semantics (plan, preflight,
journal, lock, exit code), its output goes to the watcher's log as a person's run goes to a
terminal, and a watcher killed mid-run takes its run with it (same process group) — the
run is then unfinished in the cluster journal with its holder gone, which is what the next
leader resumes.  argv carries only credential names, run ids and flags: never a value.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence


class RotateProcess:
    """``python -m rotate ARGS… COMMON…``, stdin closed, output inherited."""

    def __init__(self, common: Sequence[str], environ: Mapping[str, str]) -> None:
        self._common = list(common)
        self._env = dict(environ)

    def run(self, args: list[str]) -> int:
        try:
            done = subprocess.run([sys.executable, "-m", "rotate", *args, *self._common],
                                  stdin=subprocess.DEVNULL, env=self._env, check=False)
        except OSError:
            return 1
        return done.returncode
