"""Start-up cost of ``rotate --help`` and ``rotate list`` against the floor: a bare Python
that runs ``import typer, rich.console``.

The bars (docs/performance.md "Targets"): ``rotate --help`` at most 1.5× the floor,
``rotate list`` (which loads and validates the chain file, like a rotation) at most 2× —
i.e. the CLI adds little beyond the libraries it is built on, which holds only while the
engine, the adapters (kubernetes, hvac, httpx) and the lab are imported lazily.

The commands run interleaved (A B C A B C …) so that disk cache and CPU frequency drift hit
all alike; N runs each, medians compared. ``rotate list`` reads the example shop's chain file
(from the installed rotate-lab package, or ``--chain``) with the validated-chain cache warm
(docs/chain-file.md: any earlier command on the same file fills it) — the bar applies
there; ``rotate list (cold cache)`` runs each time with an empty cache (a first or edited
chain file: parse and full validation), printed without a bar. Both caches live in a
temporary directory, removed at the end. Exit status 1 when a ratio exceeds its bar.

    .venv/bin/python bench/startup.py [-n 10] [--bar 1.5] [--list-bar 2.0] [--chain FILE]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

VENV_BIN = Path(sys.executable).parent  # run as .venv/bin/python bench/startup.py


def venv_python() -> str:
    """The venv's interpreter, the one rotate's console script runs on (else this one)."""
    candidate = VENV_BIN / "python"
    return str(candidate) if candidate.exists() else sys.executable


def measured_environ(*layers: Mapping[str, str]) -> dict[str, str]:
    """The environment a measured command runs with: this one updated by ``layers`` in order,
    without ``PYTHONDONTWRITEBYTECODE`` — rotate is measured as installed, where pip has
    written its bytecode (with the variable set, every run would compile each module changed
    since the caches were last written, and measure that)."""
    env = dict(os.environ)
    for layer in layers:
        env.update(layer)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _rotate() -> list[str]:
    script = VENV_BIN / "rotate"
    if script.exists():
        return [str(script)]
    return [venv_python(), "-m", "rotate"]


def _time(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}")
    return elapsed


def _example_chain() -> str | None:
    try:
        from importlib.resources import files

        chain = files("rotate_lab.shop") / "ecommerce" / "rotate.yaml"
    except ModuleNotFoundError:
        return None
    return str(chain) if chain.is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="runs of each (default 10)")
    parser.add_argument("--bar", type=float, default=1.5, help="max ratio of --help "
                        "(default 1.5)")
    parser.add_argument("--list-bar", type=float, default=2.0, help="max ratio of list "
                        "(default 2.0)")
    parser.add_argument("--chain", default=None, help="chain file for `rotate list` "
                        "(default: the example shop's, from rotate-lab)")
    args = parser.parse_args(argv)
    caches = Path(tempfile.mkdtemp(prefix="rotate-startup-"))
    try:
        return _measure(args, caches)
    finally:
        shutil.rmtree(caches, ignore_errors=True)


def _measure(args: argparse.Namespace, caches: Path) -> int:
    env = measured_environ({"NO_COLOR": "1", "COLUMNS": "100",
                            "XDG_CACHE_HOME": str(caches / "warm")})
    cold = (str(caches / f"cold-{i}") for i in itertools.count())
    chain = args.chain or _example_chain()
    commands = {"import typer, rich.console": [venv_python(), "-c", "import typer, rich.console"],
                "rotate --help": [*_rotate(), "--help"]}
    envs: dict[str, Callable[[], dict[str, str]]] = {}
    bars = {"rotate --help": args.bar}
    if chain is None:
        print("rotate list: skipped (no rotate-lab installed; pass --chain FILE)")
    else:
        commands["rotate list"] = [*_rotate(), "list", "--chain", chain]
        bars["rotate list"] = args.list_bar
        commands["rotate list (cold cache)"] = commands["rotate list"]
        envs["rotate list (cold cache)"] = lambda: {**env, "XDG_CACHE_HOME": next(cold)}
    for name, argv_ in commands.items():  # warm-up: .pyc files written, the cache filled
        _time(argv_, envs.get(name, lambda: env)())
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.n):
        for name, argv_ in commands.items():
            times[name].append(_time(argv_, envs.get(name, lambda: env)()))
    medians = {name: statistics.median(t) for name, t in times.items()}
    floor = medians["import typer, rich.console"]
    ok = True
    for name, median in medians.items():
        line = f"{name:27} median {median * 1000:7.1f} ms  (n={args.n})"
        if name in bars:
            ratio = median / floor
            verdict = "ok" if ratio <= bars[name] else "TOO SLOW"
            ok = ok and ratio <= bars[name]
            line += f"  ratio {ratio:.2f} (bar {bars[name]:.2f}): {verdict}"
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
