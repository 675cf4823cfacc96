"""Waves and a canary: the order a credential's consumers move in (chain-file.md "waves").

A credential may order its consumers in **waves** — an explicit list of lists of consumer
names, or per consumer ``after: [names]`` — and name a **canary** (its first N consumers in
wave order, or named ones) that moves first, alone, and is watched for a **bake** time
before any other consumer moves.  Pure values and functions only: the plan
(rotate.engine.plan) turns them into the order of the consumer steps and one
``canary.bake`` step.

Invariants:

* every consumer is in exactly one wave, in the order the plan gives them; a consumer the
  chain file does not name moves in the *last* wave of an explicit list, and in the first
  (it waits for nothing) under ``after``;
* the canary is wave 0, alone; the waves after it keep their order without its consumers;
* names are a service's name or a Secret reader's workload ref (``deployment/ns/name``):
  what a plan step's subject is, so a journal needs nothing else to tell who moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: the workload kinds a Secret reader's name may start with (``deployment/ns/name``)
READER_KINDS = ("deployment", "statefulset", "daemonset")


@dataclass(frozen=True)
class PromQuery:
    """A PromQL instant query whose value must stay ``<= max`` while the canary bakes."""

    expr: str
    max: float
    url: str | None = None
    url_env: str | None = None

    def resolve_url(self, environ: Mapping[str, str]) -> str | None:
        return self.url or (environ.get(self.url_env) if self.url_env else None) or None


@dataclass(frozen=True)
class Canary:
    """``consumers``: how many of the first consumers in wave order (an int), or which
    (names); ``bake``: seconds the canary is watched before the next wave moves."""

    consumers: int | tuple[str, ...]
    bake: float
    query: PromQuery | None = None


@dataclass(frozen=True)
class Waves:
    """``explicit``: the waves as written (a list of lists); ``after``: consumer → the
    consumers it moves after.  Exactly one is set."""

    explicit: tuple[tuple[str, ...], ...] = ()
    after: Mapping[str, tuple[str, ...]] | None = None

    def names(self) -> tuple[str, ...]:
        """Every name the chain file writes, in order (for validation)."""
        if self.after is not None:
            out = [n for name, deps in self.after.items() for n in (name, *deps)]
        else:
            out = [n for wave in self.explicit for n in wave]
        return tuple(dict.fromkeys(out))


def is_reader_ref(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 3 and parts[0] in READER_KINDS and all(parts)


def after_cycle(after: Mapping[str, Iterable[str]]) -> tuple[str, ...] | None:
    """A cycle among ``after`` dependencies (its names, the first one repeated at the end),
    or None."""
    graph = {name: tuple(deps) for name, deps in after.items()}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> tuple[str, ...] | None:
        state[name] = 1
        path.append(name)
        for dep in graph.get(name, ()):
            if state.get(dep) == 1:
                return (*path[path.index(dep):], dep)
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[name] = 2
        return None

    for name in graph:
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def waves_of(waves: Waves | None, consumers: Iterable[str]) -> list[tuple[str, ...]]:
    """The consumers in waves (names the chain file gives that are not among ``consumers``
    are ignored: a service that does not read this credential, a reader not found)."""
    present = list(dict.fromkeys(consumers))
    if waves is None:
        return [tuple(present)] if present else []
    if waves.after is None:
        out = [tuple(n for n in wave if n in present) for wave in waves.explicit]
        named = {n for wave in waves.explicit for n in wave}
        out.append(tuple(n for n in present if n not in named))
        return [w for w in out if w]
    level: dict[str, int] = {}

    def depth(name: str) -> int:  # no cycle: the loader refused those
        if name not in level:
            deps = [d for d in waves.after.get(name, ()) if d in present] if waves.after else []
            level[name] = 1 + max((depth(d) for d in deps), default=-1)
        return level[name]

    for name in present:
        depth(name)
    top = max(level.values(), default=-1)
    return [w for w in (tuple(n for n in present if level[n] == i) for i in range(top + 1)) if w]


def with_canary(waves: list[tuple[str, ...]], canary: Canary | None) -> list[tuple[str, ...]]:
    """``waves`` with the canary taken out as wave 0 (unchanged without a canary or when
    none of its consumers is present)."""
    if canary is None:
        return waves
    ordered = [n for wave in waves for n in wave]
    if isinstance(canary.consumers, int):
        chosen = ordered[:canary.consumers]
    else:
        chosen = [n for n in ordered if n in canary.consumers]
    if not chosen:
        return waves
    rest = [tuple(n for n in wave if n not in chosen) for wave in waves]
    return [tuple(chosen), *[w for w in rest if w]]


def wave_problems(cred: Mapping[str, object],
                  services: Iterable[str]) -> list[tuple[list[str | int], str]]:
    """What the schema cannot say of a credential's ``waves`` and ``canary`` (raw data; runs
    on schema-invalid data too): unknown names, a name in two waves, a cycle of ``after``,
    a canary or waves under ``strategy: restart``.  (path parts under the credential, reason)"""
    known = set(services)
    out: list[tuple[list[str | int], str]] = []

    def check(parts: list[str | int], name: object) -> None:
        if isinstance(name, str) and name not in known and not is_reader_ref(name):
            out.append((parts, f"unknown consumer {name!r}: name a service of this chain "
                               "file, or a workload reading the Secret as "
                               "deployment/NAMESPACE/NAME (statefulset/, daemonset/)"))

    waves, canary = cred.get("waves"), cred.get("canary")
    if isinstance(waves, list):
        seen: dict[str, int] = {}
        for i, wave in enumerate(waves):
            for j, name in enumerate(wave if isinstance(wave, list) else []):
                check(["waves", i, j], name)
                if isinstance(name, str) and name in seen:
                    out.append((["waves", i, j], f"{name!r} is already in wave {seen[name] + 1}"))
                elif isinstance(name, str):
                    seen[name] = i
    elif isinstance(waves, dict):
        after: dict[str, tuple[str, ...]] = {}
        for name, entry in waves.items():
            check(["waves", name], name)
            deps = entry.get("after") if isinstance(entry, dict) else None
            for j, dep in enumerate(deps if isinstance(deps, list) else []):
                check(["waves", name, "after", j], dep)
            after[str(name)] = tuple(d for d in (deps or []) if isinstance(d, str))
        cycle = after_cycle(after)
        if cycle is not None:
            out.append((["waves", cycle[0], "after"],
                        "the after: dependencies form a cycle: " + " → ".join(cycle)))
    if isinstance(canary, dict) and isinstance(canary.get("consumers"), list):
        for j, name in enumerate(canary["consumers"]):
            check(["canary", "consumers", j], name)
    if (waves is not None or canary is not None) and cred.get("strategy") == "restart":
        out.append((["strategy"], "waves and canary need strategy overlap: under restart the "
                                  "provider accepts only the new value, so a later wave "
                                  "would fail while an earlier one moves or bakes"))
    return out
