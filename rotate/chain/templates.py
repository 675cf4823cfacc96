"""Chain-file templates: ``{/pointer}`` placeholders filled with values of the same document.

Rule (docs/chain-file.md "Templates and URL encoding"):

* ``{/pointer}`` or ``{/pointer|filter}`` is a placeholder; any ``{`` followed by ``/`` opens
  one, and it must be closed by ``}`` before any other ``{`` — ``{/a@{/b}`` is an error, not
  literal text.  Other braces (``{x}``, a lone ``}``) are literal text.
* A template whose literal text contains ``://`` is a URL template: each value is
  percent-encoded for the part of the URL its placeholder sits in (userinfo, host, path,
  query, fragment), decided from the literal text around it — a value can never move the
  boundaries, so the URL always parses back to the exact value.  Everything but RFC 3986
  *unreserved* characters is encoded; in the host part ``:``, ``[`` and ``]`` are kept so that
  ``host:port`` values and IPv6 literals work.  The scheme part is filled verbatim.
* Any other template is filled verbatim (a DSN, a header value).
* A filter overrides the part: ``raw`` (verbatim, for a value already encoded or meant to
  span parts), or ``userinfo``, ``host``, ``path``, ``query``, ``fragment`` (encode as that
  part, e.g. in a template whose scheme and host come from a placeholder).

Pure functions only; nothing here touches the network or the disk.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rotate.core.secret import Secret

FILTERS = ("raw", "userinfo", "host", "path", "query", "fragment")
_POINTER = re.compile(r"^(/([^~/]|~[01])*)+$")

#: Characters left as they are, per part (RFC 3986 unreserved are always kept by quote()).
_SAFE = {"userinfo": "", "path": "", "query": "", "fragment": "", "host": ":[]"}


class TemplateError(ValueError):
    """An ill-formed template; the message names the placeholder, never a value."""


@dataclass(frozen=True)
class Placeholder:
    pointer: str
    filter: str | None  # one of FILTERS, or None (the part decides)
    start: int  # offset of "{" in the template
    end: int  # offset just after "}"


def is_json_pointer(text: str) -> bool:
    """A non-empty RFC 6901 pointer (``~`` only as ``~0``/``~1``). The root is not allowed:
    a value source fills one place in the document, never the whole document."""
    return bool(_POINTER.match(text))


def _scan(template: str) -> Iterator[Placeholder | TemplateError]:
    pos = 0
    while True:
        start = template.find("{/", pos)
        if start < 0:
            return
        close = template.find("}", start)
        reopen = template.find("{", start + 1)
        if close < 0:
            yield TemplateError(f"placeholder {_clip(template[start:])} is not closed")
            return
        if 0 <= reopen < close:
            yield TemplateError(f"placeholder {_clip(template[start:reopen])} is not closed "
                                "before the next '{'")
            pos = reopen
            continue
        inner = template[start + 1:close]
        pointer, bar, name = inner.rpartition("|")
        if not bar:
            pointer, name = inner, ""
        if bar and name not in FILTERS:
            yield TemplateError(f"unknown filter {name!r} in {{{_clip(inner)}}} "
                                f"(filters: {', '.join(FILTERS)})")
        elif not is_json_pointer(pointer):
            yield TemplateError(f"{{{_clip(pointer)}}} is not a well-formed JSON Pointer")
        else:
            yield Placeholder(pointer, name or None, start, close + 1)
        pos = close + 1


def _clip(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def template_problems(template: str) -> list[str]:
    """Why ``template`` is ill-formed (empty when it is well-formed)."""
    return [str(p) for p in _scan(template) if isinstance(p, TemplateError)]


def placeholders(template: str) -> list[Placeholder]:
    """The well-formed placeholders, in order (ill-formed ones are the loader's to report)."""
    return [p for p in _scan(template) if isinstance(p, Placeholder)]


def template_refs(template: str) -> list[str]:
    """The JSON Pointers a template references, in order of appearance (duplicates kept)."""
    return [p.pointer for p in placeholders(template)]


def _literal(template: str, holes: list[Placeholder]) -> str:
    """The template's literal text, each placeholder replaced by one neutral character."""
    out, pos = [], 0
    for h in holes:
        out += [template[pos:h.start], "x"]
        pos = h.end
    out.append(template[pos:])
    return "".join(out)


def url_parts(template: str, holes: list[Placeholder]) -> list[str | None]:
    """For each placeholder, the URL part it sits in; all None when not a URL template."""
    text = _literal(template, holes)
    scheme_end = text.find("://")
    if scheme_end < 0:
        return [None] * len(holes)
    positions, shift = [], 0
    for h in holes:  # offsets of the neutral characters in ``text``
        positions.append(h.start - shift)
        shift += (h.end - h.start) - 1
    auth_start = scheme_end + 3
    auth_end = next((i for i in range(auth_start, len(text)) if text[i] in "/?#"), len(text))
    at = text.rfind("@", auth_start, auth_end)
    query = text.find("?", auth_end)
    frag = text.find("#", auth_end)
    parts: list[str | None] = []
    for p in positions:
        if p < auth_start:
            parts.append(None)  # the scheme: verbatim
        elif p < auth_end:
            parts.append("userinfo" if p < at else "host")
        elif 0 <= frag < p:
            parts.append("fragment")
        elif 0 <= query < p:
            parts.append("query")
        else:
            parts.append("path")
    return parts


def _text(value: Any) -> tuple[str, bool]:
    """(value as text, whether it was a Secret). JSON scalars render as JSON would."""
    if isinstance(value, Secret):
        return value.reveal(), True
    if isinstance(value, bool):
        return ("true" if value else "false"), False
    if value is None:
        return "null", False
    return str(value), False


def render_template(template: str, lookup: Callable[[str], Any]) -> str | Secret:
    """Fill every placeholder with ``lookup(pointer)``, encoded per the rule above.

    The result is a :class:`Secret` when any filled value is one, so a password never
    escapes its wrapper by being interpolated into a URL.
    """
    holes = placeholders(template)
    parts = url_parts(template, holes)
    secret = False
    out: list[str] = []
    pos = 0
    for hole, part in zip(holes, parts, strict=True):
        out.append(template[pos:hole.start])
        text, was_secret = _text(lookup(hole.pointer))
        secret = secret or was_secret
        chosen = hole.filter or part
        if chosen is not None and chosen != "raw":
            text = urllib.parse.quote(text, safe=_SAFE[chosen])
        out.append(text)
        pos = hole.end
    out.append(template[pos:])
    rendered = "".join(out)
    return Secret(rendered) if secret else rendered
