"""Start-up cost of ``rotate --help`` against the floor: ``import typer, rich.console``.

The bar (the issue's): ``rotate --help`` may cost at most 1.5× a bare Python that imports
typer and rich.console — i.e. the CLI adds little beyond the libraries it is built on, which
holds only while the engine, the adapters (kubernetes, hvac, httpx, jsonschema, ruamel) and
the lab are imported lazily.

Both commands run interleaved (A B A B …) so that disk cache and CPU frequency drift hit both
alike; N runs each, median compared. Exit status 1 when the ratio exceeds the bar.

    .venv/bin/python bench/startup.py [-n 10] [--bar 1.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent  # run as .venv/bin/python bench/startup.py


def _python() -> str:
    candidate = VENV_BIN / "python"
    return str(candidate) if candidate.exists() else sys.executable


def _rotate() -> list[str]:
    script = VENV_BIN / "rotate"
    if script.exists():
        return [str(script)]
    return [_python(), "-c", "import sys; from rotate.cli.app import main; sys.exit(main())"]


def _time(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="runs of each (default 10)")
    parser.add_argument("--bar", type=float, default=1.5, help="max ratio (default 1.5)")
    args = parser.parse_args(argv)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    floor_cmd = [_python(), "-c", "import typer, rich.console"]
    rotate_cmd = [*_rotate(), "--help"]
    # One warm-up each: the first run pays for writing .pyc files, not for imports.
    _time(floor_cmd, env)
    _time(rotate_cmd, env)
    floor, rotate = [], []
    for _ in range(args.n):
        floor.append(_time(floor_cmd, env))
        rotate.append(_time(rotate_cmd, env))
    f, r = statistics.median(floor), statistics.median(rotate)
    ratio = r / f
    print(f"import typer, rich.console  median {f * 1000:7.1f} ms  (n={args.n})")
    print(f"rotate --help               median {r * 1000:7.1f} ms  (n={args.n})")
    verdict = "ok" if ratio <= args.bar else "TOO SLOW"
    print(f"ratio {ratio:.2f} (bar {args.bar:.2f}): {verdict}")
    return 0 if ratio <= args.bar else 1


if __name__ == "__main__":
    sys.exit(main())
