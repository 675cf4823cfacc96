"""Imports flow one way: cli → engine → stages → clients / chain / core; the lab is apart.

Checked statically (ast) over every module, including imports inside functions, so a
lazy import that crosses a layer is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import ROTATE_PACKAGE

PKG = ROTATE_PACKAGE

#: layer → the rotate.* layers it may import
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "chain": {"chain", "core"},
    "clients": {"clients", "chain", "core"},  # adapters are built from chain config
    "stages": {"stages", "clients", "chain", "core"},
    "providers": {"providers", "clients", "chain", "core"},  # beside stages, independent
    "engine": {"engine", "stages", "providers", "clients", "chain", "core"},
    "cli": {"cli", "engine", "core", "chain", "lab"},
}
#: third-party/system libraries only the client adapters may import
ADAPTER_ONLY = {"hvac", "kubernetes", "httpx", "requests", "urllib3", "subprocess", "redis",
                "psycopg"}
#: product modules that may import the lab (rotate_lab, a separate distribution): none.
#: `rotate lab ...` reaches it through the entry point rotate.plugins:lab (cli/commands/plugins.py).
LAB_GATES: set[str] = set()


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _product_modules() -> list[Path]:
    return [p for p in PKG.rglob("*.py")
            if p.relative_to(PKG).parts[0] in ALLOWED]


@pytest.mark.parametrize("path", _product_modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_flow_one_way(path: Path) -> None:
    rel = path.relative_to(PKG)
    layer = rel.parts[0]
    for name in _imports(path):
        root = name.split(".")[0]
        if root == "rotate_lab":
            assert rel.as_posix() in LAB_GATES, f"{rel} imports the lab ({name})"
        if root == "rotate" and name != "rotate":
            target = name.split(".")[1]
            if target == "lab":
                assert rel.as_posix() in LAB_GATES, f"{rel} imports the lab ({name})"
            else:
                assert target in ALLOWED[layer], f"{rel} ({layer}) imports {name}"
        if root in ADAPTER_ONLY:
            assert layer == "clients", f"{rel} imports {root}; only rotate/clients may"


def test_the_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import hvac\n    from rotate.engine import api\n")
    assert _imports(bad) == ["hvac", "rotate.engine"]
