"""``kubectl port-forward`` as a user runs it: started, its local port read from what it
prints, stopped by its pid at the end."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

KUBECTL = shutil.which("kubectl")
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+)")


@contextmanager
def kubectl_port_forward(args: Sequence[str], env: Mapping[str, str]) -> Iterator[int]:
    """``kubectl ARGS`` (ARGS includes ``port-forward``); the 127.0.0.1 port it forwards
    from, once it says so (its first line: it blocks until then, or until kubectl exits)."""
    assert KUBECTL is not None, "kubectl is not installed"
    proc = subprocess.Popen([KUBECTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(env))
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        match = _FORWARDING.search(line)
        if match is None:
            proc.kill()
            raise AssertionError(f"kubectl port-forward did not forward: {line!r} "
                                 f"{proc.stderr.read()[-2000:]!r}")
        yield int(match.group(1))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
