"""The chain file's bytes and its YAML, read safely: a regular file of at most MAX_BYTES,
UTF-8, parsed by ruamel's round-trip parser (line numbers for every problem) within
MAX_NODES and MAX_DEPTH, then turned into plain JSON data.

Why bounded: a hostile file (an alias bomb, a huge flow list, deep nesting) must not hang or
crash the loader; each refusal is a ChainFileError (exit 2) within a second.  Error texts
never quote the file's values (ruamel's messages quote both values of a duplicate key: only
the key is named).  ruamel is imported inside the functions: ``rotate --help`` must not pay
for it.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rotate.core.errors import ChainFileError, ChainFileProblem, UsageError

#: Limits that keep a hostile file (an alias bomb, a huge flow list, deep nesting) from hanging
#: or crashing the loader; each refusal is a chain-file error (exit 2) well within a second.
#: The canonical example (10 services) is 7 KB and ~760 nodes; 10 000 nodes is ~130 services
#: (ruamel's round-trip parser costs ~50 µs a node: 10 000 nodes stay near half a second).
MAX_BYTES = 1 << 20
MAX_NODES = 10_000  # after alias expansion: what plain() and jsonschema will walk
MAX_DEPTH = 64


def _refuse(file: str, reason: str) -> ChainFileError:
    return ChainFileError([ChainFileProblem(file, None, "", reason)])


#: what a non-regular file is, in the words of the refusal
_NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISDIR, "a directory"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def read_chain_bytes(path: Path) -> bytes:
    """The file's bytes; ChainFileError when unreadable or over MAX_BYTES.

    Only a regular file is read (UsageError, exit 2, naming the path, otherwise): a named
    pipe would block the command until something writes to it, a device never ends.  The
    file is opened non-blocking (opening a FIFO waits for a writer) and checked on the
    opened descriptor, so what is checked is what is read."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                what = next((name for test, name in _NOT_REGULAR if test(st.st_mode)),
                            "not a regular file")
                raise UsageError(f"the chain file {file} is {what}, not a regular file",
                                 hint="point --chain (or ROTATE_CHAIN) at the chain file "
                                      "itself")
            with open(fd, "rb", closefd=False) as fh:
                raw = fh.read(MAX_BYTES + 1)
        finally:
            os.close(fd)
        size = max(len(raw), st.st_size)
    except OSError as exc:
        raise _refuse(file, f"cannot read the file: {exc.strerror or 'not readable'}") from None
    if size > MAX_BYTES:
        raise _refuse(file, f"the file is {size / (1 << 20):.1f} MiB; a chain file is at most "
                            f"{MAX_BYTES >> 20} MiB")
    return raw


def _decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(file, "cannot read the file: not readable UTF-8") from None


@functools.lru_cache(maxsize=1)
def _bounded_classes() -> tuple[type, type]:
    """ruamel's round-trip parser, refusing a document deeper than MAX_DEPTH or expanding to
    more than MAX_NODES nodes — checked event by event, before the (recursive) composer
    descends and before anything walks the aliases (a shared node is walked once per alias).
    """
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionStartEvent,
        MappingEndEvent,
        ScalarEvent,
        SequenceEndEvent,
    )
    from ruamel.yaml.parser import RoundTripParser
    from ruamel.yaml.scanner import RoundTripScanner

    class BoundedScanner(RoundTripScanner):
        """Refuses deep flow nesting as it is scanned: ruamel's scanner reads ahead and keeps
        a possible key per flow level, so ``[[[[…`` costs quadratic time before any event."""

        def fetch_flow_collection_start(self, token_class: Any, to_push: str) -> None:
            if self.flow_level >= MAX_DEPTH:
                raise _Refused(self.reader.line + 1,
                               f"the YAML nests deeper than {MAX_DEPTH} levels")
            super().fetch_flow_collection_start(token_class, to_push)

    class BoundedParser(RoundTripParser):
        def get_event(self) -> Any:
            event = super().get_event()
            budget: _Budget = self.__dict__.setdefault("_budget", _Budget())
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, CollectionStartEvent):
                budget.open(event.anchor, line)
            elif isinstance(event, MappingEndEvent | SequenceEndEvent):
                budget.close()
            elif isinstance(event, ScalarEvent):
                budget.node(1, event.anchor, line)
            elif isinstance(event, AliasEvent):
                budget.node(budget.anchors.get(event.anchor, 1), None, line)
            return event

    return BoundedScanner, BoundedParser


class _Budget:
    """Expanded node count and nesting depth of the document parsed so far."""

    def __init__(self) -> None:
        self.total = 0
        self.anchors: dict[str, int] = {}  # anchor → expanded size of its node
        self.stack: list[list[Any]] = []  # open collections: [size so far, anchor]

    def _spend(self, size: int, line: int | None) -> None:
        self.total += size
        if self.total > MAX_NODES:
            raise _Refused(line, f"the YAML expands to more than {MAX_NODES} nodes "
                                 "(aliases count once per use)")

    def open(self, anchor: str | None, line: int | None) -> None:
        self._spend(1, line)
        self.stack.append([1, anchor])
        if len(self.stack) > MAX_DEPTH:
            raise _Refused(line, f"the YAML nests deeper than {MAX_DEPTH} levels")

    def close(self) -> None:
        size, anchor = self.stack.pop()
        self._done(size, anchor)

    def node(self, size: int, anchor: str | None, line: int | None) -> None:
        """A scalar (size 1) or an alias (the expanded size of the node it repeats)."""
        self._spend(size, line)
        self._done(size, anchor)

    def _done(self, size: int, anchor: str | None) -> None:
        if anchor:
            self.anchors[anchor] = size
        if self.stack:
            self.stack[-1][0] += size


class _Refused(Exception):
    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


def parse_yaml(raw: bytes, file: str) -> Any:
    """``raw`` (from :func:`read_chain_bytes`) as ruamel's round-trip tree, whose nodes keep
    their line numbers for the problems; ChainFileError for text that is not UTF-8, YAML
    that does not parse, or a document over the limits."""
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    text = _decode(raw, file)
    yaml = YAML(typ="rt")
    yaml.Scanner, yaml.Parser = _bounded_classes()
    try:
        return yaml.load(text)
    except DuplicateKeyError as exc:
        # ruamel's message quotes both values; name only the key.
        m = re.search(r'duplicate key "([^"]*)"', str(exc.problem or ""))
        key = m.group(1) if m else "?"
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ChainFileError([ChainFileProblem(file, line, "", f"duplicate key {key!r}")]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        reason = f"YAML syntax error: {(exc.problem or exc.context or 'invalid YAML')[:120]}"
        raise ChainFileError([ChainFileProblem(file, line, "", reason)]) from None
    except YAMLError:
        raise ChainFileError([ChainFileProblem(file, None, "", "YAML syntax error")]) from None
    except _Refused as exc:
        raise ChainFileError([ChainFileProblem(file, exc.line, "", exc.reason)]) from None


def plain(node: Any) -> Any:
    """ruamel's round-trip types → plain JSON types (merge keys already applied by items())."""
    from datetime import date

    if isinstance(node, Mapping):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, date):
        return node.isoformat()  # unquoted timestamps: the schema will say "must be a string"
    return node
