"""YAML text of what the CLI prints: ``rotate rbac``'s Kubernetes objects and the one
document of ``-o yaml``.

A ``-o yaml`` document is the ``-o json`` document, field for field: it is made from the
JSON text (so it holds exactly what JSON holds — Secrets masked, tuples as lists, the same
``apiVersion`` and ``kind`` first) and written as one block-style YAML document, each value
on one line (no folding at 80 columns), keys in the JSON's order.  ruamel.yaml is imported
only when YAML is printed.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

#: wide enough that no value is folded over lines (a long message stays one line)
_NO_FOLDING = 1 << 16


def to_yaml(objects: Sequence[Any], *, explicit_start: bool = True,
            width: int | None = None, null: str = "") -> str:
    """Block-style YAML, one document per object; lists not indented (as kubectl).
    ``explicit_start``: ``---`` before each document (what ``kubectl apply -f -`` reads);
    ``null``: how None is written (ruamel's default: nothing after the colon)."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.explicit_start = explicit_start
    if width is not None:
        yaml.width = width
    if null:
        from ruamel.yaml.representer import RoundTripRepresenter

        class NullRepresenter(RoundTripRepresenter):
            """ruamel's round-trip representer, None written as ``null`` (a subclass:
            ``add_representer`` on ruamel's own class would change every later dump)."""

        NullRepresenter.add_representer(type(None), lambda representer, _: (
            representer.represent_scalar("tag:yaml.org,2002:null", null)))
        yaml.Representer = NullRepresenter
    buffer = io.StringIO()
    yaml.dump_all(list(objects), buffer)
    return buffer.getvalue()


def document_yaml(json_text: str) -> str:
    """The YAML of one printed JSON document (the text :func:`rotate.cli.console.dumps`
    made), with the same fields in the same order; JSON's null is written ``null``."""
    return to_yaml([json.loads(json_text)], explicit_start=False, width=_NO_FOLDING,
                   null="null")
