"""What a child ``rotate`` process imports: the cheap commands must not load the heavy
libraries (kubernetes, hvac, jsonschema, httpx, ruamel), which cost far more than the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("kubernetes", "hvac", "jsonschema", "httpx", "ruamel")

CHILD = """
import json, sys
from rotate.cli.app import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\\n")
"""


def imported_after(*args: str, cwd: Path) -> tuple[int, set[str]]:
    """Exit code and every module imported; HOME (hence the chain cache) is ``cwd``."""
    done = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, env={"NO_COLOR": "1", "COLUMNS": "100",
                                                      "PATH": "/usr/bin:/bin",
                                                      "HOME": str(cwd)})
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return int(report["code"] or 0), set(report["modules"])


def modules_after(*args: str, cwd: Path) -> tuple[int, set[str]]:
    """Exit code and the top-level packages imported."""
    code, modules = imported_after(*args, cwd=cwd)
    return code, {m.split(".")[0] for m in modules}
