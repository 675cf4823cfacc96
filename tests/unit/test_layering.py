"""Imports flow one way, as pyproject's ``[tool.importlinter]`` contracts say; the lab is apart.

The contracts are read from pyproject.toml, the one place the layer order (and which modules
may import an I/O driver or the lab) is written down; this test applies them statically
(ast) to every product module, imports inside functions included, so a lazy import that
crosses a layer fails here too, without ``lint-imports`` installed.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROTATE_PACKAGE

PKG = ROTATE_PACKAGE


@dataclass(frozen=True)
class Rules:
    """``layers``: highest first, each level one or more independent siblings (import-linter's
    ``"a | b"``); ``forbidden``: source module → modules it may not import."""

    layers: tuple[tuple[str, ...], ...]
    forbidden: tuple[tuple[str, frozenset[str]], ...]


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def rules_of(pyproject: Path) -> Rules:
    contracts: list[dict[str, Any]] = tomllib.loads(pyproject.read_text())[
        "tool"]["importlinter"]["contracts"]
    (layered,) = [c for c in contracts if c["id"] == "layers"]
    forbidden: dict[str, set[str]] = {}
    for contract in contracts:
        if contract["type"] == "forbidden":
            for source in contract["source_modules"]:
                forbidden.setdefault(source, set()).update(contract["forbidden_modules"])
    levels = tuple(tuple(m.strip() for m in level.split("|")) for level in layered["layers"])
    return Rules(levels,
                 tuple((s, frozenset(f)) for s, f in sorted(forbidden.items())))


def problems(module: str, imports: list[str], rules: Rules) -> list[str]:
    """Each import of ``module`` that a contract forbids: a higher layer, or a module a
    forbidden contract keeps from it (a direct import; indirect ones go through a layer that
    may)."""
    found: list[str] = []
    own = next((i for i, level in enumerate(rules.layers)
                if any(_within(module, m) for m in level)), None)
    for name in imports:
        if own is not None:
            mine = next(m for m in rules.layers[own] if _within(module, m))
            siblings = [m for m in rules.layers[own] if m != mine]
            for layer in [m for level in rules.layers[:own] for m in level] + siblings:
                if _within(name, layer):
                    kind = "an independent sibling" if layer in siblings else "a higher layer"
                    found.append(f"{module} imports {name}, {kind} ({layer})")
                    break
        for source, banned in rules.forbidden:
            if _within(module, source):
                found += [f"{module} imports {name} ({source} may not import {b})"
                          for b in sorted(banned) if _within(name, b)]
    return found


def imports_of(path: Path, module: str) -> list[str]:
    """Every module ``path`` imports, anywhere in it; relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            names.append(target)
            if node.module is None:  # from . import x: x is a module
                names += [f"{target}.{a.name}" for a in node.names]
    return names


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


@pytest.fixture(scope="module")
def rules(repo_root: Path) -> Rules:
    return rules_of(repo_root / "pyproject.toml")


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PKG)))
def test_imports_flow_one_way(path: Path, rules: Rules) -> None:
    module = _module_name(path)
    assert problems(module, imports_of(path, module), rules) == []


def test_every_product_package_is_a_layer(rules: Rules) -> None:
    layered = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert {m.removeprefix("rotate.") for level in rules.layers for m in level} == layered


def test_the_check_can_fail(tmp_path: Path, rules: Rules) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import hvac\n    from rotate.engine import api\n"
                   "    from ..cli import app\n    import rotate_lab.control\n")
    imports = imports_of(bad, "rotate.stages.bad")
    assert imports == ["hvac", "rotate.engine", "rotate.cli", "rotate_lab.control"]
    found = problems("rotate.stages.bad", imports, rules)
    assert [p.split(" (")[0] for p in found] == [
        "rotate.stages.bad imports hvac", "rotate.stages.bad imports rotate.engine, a higher "
        "layer", "rotate.stages.bad imports rotate.cli, a higher layer",
        "rotate.stages.bad imports rotate_lab.control"]
    assert problems("rotate.clients.vault", ["hvac", "rotate.core.secret"], rules) == []
    assert problems("rotate.cli.app", ["rotate.clients.kube"], rules) != []
    assert problems("rotate.providers.x", ["rotate.stages.rollout"], rules) != []
