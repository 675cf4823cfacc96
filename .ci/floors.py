"""Print pip constraints that pin every ``>=`` floor of the given pyproject.toml files.

``make test-floors`` installs the product and the lab with these constraints and runs the
unit tests, so a floor in pyproject is a version the suite passed with, not a guess.  Every
requirement of ``project.dependencies`` and of every extra that names a floor is pinned to
it (``hvac>=2.1`` -> ``hvac==2.1``); extras of a requirement are dropped (pip refuses them
in a constraints file) and a requirement without a floor (``rotate[all]``) is left free.

Usage: python .ci/floors.py pyproject.toml [lab/pyproject.toml ...] > constraints.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

#: ``name[extras] >= version`` with nothing but the floor (an upper bound would need a choice)
FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)\s*$")


def requirements(pyproject: Path) -> Iterator[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    yield from project.get("dependencies", [])
    for extra in project.get("optional-dependencies", {}).values():
        yield from extra


def pins(paths: Iterable[Path]) -> dict[str, str]:
    """Name (normalised as pip compares names) -> floor; one floor per name, or an error."""
    found: dict[str, str] = {}
    for path in paths:
        for requirement in requirements(path):
            match = FLOOR.match(requirement)
            if match is None:
                continue
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            if found.setdefault(name, match.group(2)) != match.group(2):
                raise SystemExit(f"{path}: {name} has two floors: {found[name]} and "
                                 f"{match.group(2)}")
    return found


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name, version in sorted(pins(Path(a) for a in argv).items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
