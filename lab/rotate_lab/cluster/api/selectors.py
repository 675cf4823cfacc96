"""Label and field selectors, as the ``labelSelector``/``fieldSelector`` query strings and as
the ``spec.selector`` objects (``matchLabels``/``matchExpressions``) of workloads.

Label selector grammar (Kubernetes' own): comma-separated requirements, each one of
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k``.
A requirement list matches when every requirement does; the empty selector matches all.
``!=`` and ``notin`` match objects that lack the key, as in Kubernetes.

Field selectors: ``path=v``, ``path==v``, ``path!=v`` over dotted paths into the object
(``metadata.name``, ``status.phase``, ``involvedObject.name`` …); a missing field reads as "".
Real servers accept only a per-kind list of fields; accepting every path is a superset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


class SelectorError(ValueError):
    """An unparseable selector; the API server answers 400 BadRequest."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "in", "notin", "exists", "!exists" ("=" is "in" with one value)
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "in":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        have = labels or {}
        return all(r.matches(have) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` → two parts)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    reqs: list[Requirement] = []
    for part in _split_top(text):
        if m := _SET_RE.match(part):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(2), values))
        elif m := _CMP_RE.match(part):
            op = "notin" if m.group(2) == "!=" else "in"
            reqs.append(Requirement(m.group(1), op, frozenset([m.group(3)])))
        elif m := _EXISTS_RE.match(part):
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return LabelSelector(tuple(reqs))


def selector_from_spec(spec: Mapping[str, Any] | None) -> LabelSelector:
    """A workload's ``spec.selector`` (matchLabels + matchExpressions) as a LabelSelector.

    Note Kubernetes' rule: an empty or absent selector object matches everything here;
    workloads are validated elsewhere to have a non-empty one.
    """
    if not spec:
        return LabelSelector()
    reqs = [Requirement(k, "in", frozenset([str(v)]))
            for k, v in (spec.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in spec.get("matchExpressions") or []:
        op = ops.get(str(expr.get("operator")))
        if op is None:
            raise SelectorError(f"invalid selector operator {expr.get('operator')!r}")
        reqs.append(Requirement(str(expr.get("key")), op,
                                frozenset(str(v) for v in expr.get("values") or [])))
    return LabelSelector(tuple(reqs))


def spec_to_query(spec: Mapping[str, Any] | None) -> str:
    """``{"matchLabels": {"app": "x"}}`` → ``"app=x"`` (for list calls by selector)."""
    out = [f"{k}={v}" for k, v in sorted(((spec or {}).get("matchLabels") or {}).items())]
    for expr in (spec or {}).get("matchExpressions") or []:
        key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op in ("In", "NotIn"):
            out.append(f"{key} {op.lower()} ({','.join(vals)})")
        elif op == "Exists":
            out.append(str(key))
        elif op == "DoesNotExist":
            out.append(f"!{key}")
    return ",".join(out)


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[str, bool, str], ...] = ()  # (path, equal?, value)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in self.terms)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return ""
        cur = cur[part]
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    terms: list[tuple[str, bool, str]] = []
    for part in text.split(","):
        if not part.strip():
            continue
        for op, equal in (("!=", False), ("==", True), ("=", True)):
            if op in part:
                path, value = part.split(op, 1)
                terms.append((path.strip(), equal, value.strip()))
                break
        else:
            raise SelectorError(f"invalid field selector: {part.strip()!r}")
    return FieldSelector(tuple(terms))
