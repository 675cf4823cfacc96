"""``python -m rotate_lab.control up|down|status|fault``: the lab without the ``rotate`` CLI.

Prints the result as JSON; a lab error is its message on stderr and its exit code.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rotate.core.errors import RotateError
from rotate_lab.control import down, fault, status, up


def main(argv: list[str] | None = None) -> int:
    """Bare entry point for when the CLI group is absent: ``python -m rotate_lab.control``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rotate_lab.control")
    ap.add_argument("command", choices=("up", "down", "status", "fault"))
    ap.add_argument("args", nargs="*")
    ap.add_argument("--dir", default=".rotate-lab")
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--reloader", action="store_true")
    ap.add_argument("--clear", action="store_true")
    ns = ap.parse_args(argv)
    out: Any
    try:
        if ns.command == "up":
            out = up(ns.dir, ns.profile, ns.reloader,
                     on_progress=lambda m: print(m, file=sys.stderr))
        elif ns.command == "down":
            out = down(ns.dir)
        elif ns.command == "status":
            out = status(ns.dir)
        else:
            kind = ns.args[0] if ns.args else None
            target = ns.args[1] if len(ns.args) > 1 else None
            out = fault(ns.dir, kind, target, ns.clear)
    except RotateError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
