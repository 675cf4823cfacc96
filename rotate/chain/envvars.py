"""Environment variables in the chain file: ``${VAR}`` in a value is the variable's value, so
one file serves several environments (docs/chain-file.md "Environment variables").

Rules (the invariants the loader and the validated-chain cache rely on):

* Only string *values* are expanded, never mapping keys (credential and service names, JSON
  Pointers stay what the file says) and never comments.  A value that was a number or a
  boolean in the YAML stays one; an expanded value is always a string.
* ``${NAME}`` with NAME matching ``[A-Za-z_][A-Za-z0-9_]*`` is a reference; ``$${`` is the
  literal text ``${`` (so ``$${NAME}`` stays ``${NAME}``); any other ``$`` is plain text
  (``{/pointer}`` placeholders of templates never look like a reference).
* Expansion is one pass: a variable's value is never expanded again, and a node shared
  through a YAML anchor is expanded once.
* A reference to an unset variable is a chain-file problem (exit 2) naming the variable,
  with the line and the JSON path of the value.  Set-but-empty is a value (the empty string).

The cache key must change whenever an expanded value could: :func:`referenced_names` finds
every name the raw text mentions (comments included: a superset is harmless).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rotate.core.errors import ChainFileProblem

_TOKEN = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(rb"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def referenced_names(raw: bytes) -> list[str]:
    """Every ``${NAME}`` the raw file text mentions, sorted, once each."""
    return sorted({m.group(1).decode("ascii") for m in _NAME.finditer(raw)})


def expand_text(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """``text`` with its references replaced, and the names of the unset ones (in order)."""
    missing: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "${"
        value = environ.get(name)
        if value is None:
            missing.append(name)
            return match.group(0)
        return value

    return _TOKEN.sub(substitute, text), missing


def expand_tree(root: Any, file: str, environ: Mapping[str, str]) -> list[ChainFileProblem]:
    """Expand every string value of ruamel's round-trip tree ``root`` in place; the problems
    of unset variables (none when every reference is set)."""
    problems: list[ChainFileProblem] = []
    seen: set[int] = set()

    def line_of(node: Any, where: Any) -> int | None:
        lc: Any = getattr(node, "lc", None)
        try:
            pos = lc.value(where) if isinstance(node, Mapping) else lc.item(where)
        except (AttributeError, KeyError, IndexError, TypeError):
            return None
        return int(pos[0]) + 1

    def visit(node: Any, path: str) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, Mapping):
            # merged keys (``<<: *anchor``) included: ruamel copies their values, unexpanded
            places: list[tuple[Any, Any]] = list(node.items())
        elif isinstance(node, list):
            places = list(enumerate(node))
        else:
            return
        for where, value in places:
            here = f"{path}/{_escape(str(where))}"
            if isinstance(value, str):
                if "$" not in value:
                    continue
                expanded, missing = expand_text(str(value), environ)
                for name in missing:
                    problems.append(ChainFileProblem(
                        file, line_of(node, where), here,
                        f"environment variable {name} is not set (write $${{{name}}} for the "
                        f"literal text ${{{name}}})"))
                if not missing and expanded != value:
                    node[where] = expanded
            else:
                visit(value, here)

    visit(root, "")
    return problems


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
