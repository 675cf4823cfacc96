"""A :class:`~rotate.engine.drafting.draft.Drafted` as chain-file YAML, through ruamel's round-trip
dumper so that the ``# guess:`` comments sit in the file next to what they explain, in the
layout of the lab's chain file (block mappings, value sources and small objects in flow
style).  ruamel is imported when rendering: nothing else pays for it."""

from __future__ import annotations

import io
import textwrap
from typing import Any

from rotate.engine.drafting.draft import Drafted, Path_

WIDTH = 96
HEADER = """\
Drafted by `rotate init` from the cluster{cc}.
Review every `# guess:` line, then run `rotate doctor` and `rotate CREDENTIAL` (a plan).
Reference: docs/chain-file.md."""


def _comment(text: str, prefix: str = "guess: ") -> str:
    lines = textwrap.wrap(prefix + text, WIDTH - 10, subsequent_indent="  ",
                          break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def _flow(path: Path_, value: dict[str, Any]) -> bool:
    if len(path) >= 4 and path[0] == "services" and path[2] == "values":
        return True  # a value source
    return (len(path) > 1 and len(value) <= 4
            and all(not isinstance(v, dict | list) for v in value.values())
            and path[-1] not in ("backend", "auth", "secret", "externalSecret", "overlap")
            and not (len(path) == 3 and path[0] == "credentials" and path[2] == "providers"))


def _build(value: Any, path: Path_) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        node = CommentedMap()
        for key, item in value.items():
            node[key] = _build(item, (*path, key))
        if path and _flow(path, value):
            node.fa.set_flow_style()
        return node
    if isinstance(value, list):
        seq = CommentedSeq()
        for index, item in enumerate(value):
            seq.append(_build(item, (*path, index)))
        if all(not isinstance(v, dict | list) for v in value):
            seq.fa.set_flow_style()
        return seq
    return value


def _node_at(root: Any, path: Path_) -> Any:
    node = root
    for part in path:
        node = node[part]
    return node


def _indent(path: Path_) -> int:
    """The column of the key (or ``- ``) at ``path`` in block style (mapping indent 2,
    sequences indented 4 with the dash at 2)."""
    return sum(4 if isinstance(part, int) else 2 for part in path[:-1])


def render(draft: Drafted, config_center_read: bool) -> str:
    """The chain file's text."""
    from ruamel.yaml import YAML

    root = _build(draft.data, ())
    for path, why in draft.guesses.items():
        parent = _node_at(root, path[:-1])
        last = path[-1]
        present = last in parent if isinstance(parent, dict) else (
            isinstance(last, int) and last < len(parent))
        if not present:
            continue
        if parent.fa.flow_style():
            continue  # a comment cannot sit inside a flow collection
        parent.yaml_set_comment_before_after_key(last, before=_comment(why),
                                                 indent=_indent(path))
    header = HEADER.format(cc=" and its Config Center" if config_center_read else "")
    notes = "".join(f"\n{_comment(note, 'not drafted: ')}" for note in draft.notes)
    root.yaml_set_start_comment(header + notes)
    for key in ("backend", "cluster", "configCenter", "credentials", "services"):
        if key in root and key != "backend":
            root.yaml_set_comment_before_after_key(key, before="\n", indent=0)
    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # a value source stays on its line, as in the lab's chain file
    buffer = io.StringIO()
    yaml.dump(root, buffer)
    return buffer.getvalue()
