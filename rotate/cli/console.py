"""The one object every byte of CLI output goes through.

Rules (cli.md "Human output"):

* ``-o json`` (or ``-o yaml``): stdout carries exactly one document and nothing else.
  :meth:`json` refuses a second document, and every human line goes to stderr. The YAML
  document is the JSON one, field for field (rotate.cli.yaml_text); ``json_mode`` is true
  for both — it means "stdout is reserved for the document".
* text: the result (a table, a plan, a report) goes to stdout — it is the only output;
  progress, notes, warnings and errors always go to stderr so a pipe gets only the result.
* colour follows ``NO_COLOR`` and TTY detection (rich does both); ``COLUMNS`` fixes the width
  (the golden tests run with ``NO_COLOR=1 COLUMNS=100``).

Plain lines are printed with markup and highlighting off and without wrapping, so that text
such as ``[2/14]`` or a target name is printed as is and piped output is stable.

Versioning: every JSON document the CLI prints (and every ``--report-file``) starts with
``apiVersion`` (:data:`API_VERSION`) and ``kind``; :func:`versioned` puts them there, so a
document without a ``kind`` cannot be printed. docs/cli.md lists every kind and its fields.

Secrets: nothing should hand this object a :class:`~rotate.core.secret.Secret`; if something
does, it is rendered through ``str()`` — the mask — and never revealed (JSON included).
"""

from __future__ import annotations

import json as _json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rotate.core.secret import Secret

if TYPE_CHECKING:
    from rich.console import Console as RichConsole
    from rich.console import RenderableType


#: the version of every JSON document the CLI prints; additive changes keep it
API_VERSION = "rotate/v1"


def versioned(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with ``apiVersion`` and ``kind`` first. It must name its ``kind``."""
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError("a JSON document needs a kind (docs/cli.md)")
    rest = {k: v for k, v in document.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": API_VERSION, "kind": kind, **rest}


def dumps(document: Mapping[str, Any]) -> str:
    """The versioned document as printed: indented JSON, Secrets masked."""
    return _json.dumps(versioned(document), indent=2, default=_json_default) + "\n"


def _json_default(value: Any) -> Any:
    if isinstance(value, Secret):
        return value.mask()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _safe(value: Any) -> Any:
    return str(value) if isinstance(value, Secret) else value


class Console:
    """Output for one invocation. Create it inside the command (streams are read then)."""

    def __init__(self, output: str = "text", report_file: Path | None = None) -> None:
        #: how the document is written on stdout: "json", "yaml", or "" for text output
        self.document_format = output if output in ("json", "yaml") else ""
        self.json_mode = bool(self.document_format)
        self.report_file = report_file
        self._out: RichConsole | None = None
        self._err: RichConsole | None = None
        self._json_written = False
        self._report_kept = False

    # -- the two rich consoles, built lazily so `--help` never imports rich.console --------
    @staticmethod
    def _make(stream: TextIO) -> RichConsole:
        from rich.console import Console as RichConsole

        return RichConsole(file=stream, highlight=False, emoji=False)

    @property
    def err(self) -> RichConsole:
        if self._err is None:
            self._err = self._make(sys.stderr)
        return self._err

    @property
    def out(self) -> RichConsole:
        """Where human results go: stdout, unless stdout is reserved for JSON."""
        if self.json_mode:
            return self.err
        if self._out is None:
            self._out = self._make(sys.stdout)
        return self._out

    @property
    def result_is_terminal(self) -> bool:
        return self.out.is_terminal

    @property
    def progress_is_terminal(self) -> bool:
        return self.err.is_terminal

    # -- results ------------------------------------------------------------------------
    def lines(self, lines: list[str]) -> None:
        """Plain result lines (no markup, no wrapping), in one print: rich's per-call cost
        (~0.15 ms) would make a 100-consumer plan's 1,235 lines cost 0.18 s of CPU."""
        if lines:
            self.out.print("\n".join(str(_safe(line)) for line in lines), markup=False,
                           highlight=False, soft_wrap=True)

    def render(self, renderable: RenderableType) -> None:
        """A rich renderable (a table on a terminal)."""
        self.out.print(_safe(renderable))

    def json(self, document: Mapping[str, Any]) -> None:
        """The one document of this invocation, on stdout (versioned): JSON, or under
        ``-o yaml`` the same document as YAML."""
        if self._json_written:
            raise RuntimeError("a second JSON document would break `-o json` consumers")
        text = dumps(document)
        if self.document_format == "yaml":
            from rotate.cli.yaml_text import document_yaml

            text = document_yaml(text)
        self._json_written = True
        sys.stdout.write(text)
        sys.stdout.flush()

    @property
    def json_written(self) -> bool:
        return self._json_written

    def document(self, document: Mapping[str, Any]) -> None:
        """The invocation's result document: on stdout under ``-o json``, and in the
        ``--report-file`` (if any) in every mode. Only the first one is kept."""
        if self.json_mode:
            self.json(document)
        self.keep(document)

    def keep(self, document: Mapping[str, Any]) -> None:
        """Write ``document`` to the ``--report-file``, once; a write failure is reported
        on stderr and does not change the command's exit code."""
        if self.report_file is None or self._report_kept:
            return
        self._report_kept = True
        from rotate.cli.report_file import write_report_file

        try:
            write_report_file(self.report_file, dumps(document))
        except OSError as exc:
            self.error(f"could not write the report to {self.report_file}: "
                       f"{exc.strerror or type(exc).__name__}")

    # -- side channel (always stderr) ---------------------------------------------------
    def note(self, text: str) -> None:
        self.err.print(_safe(text), markup=False, highlight=False, soft_wrap=True)

    def warn(self, text: str) -> None:
        self.err.print("warning: " + str(_safe(text)), style="yellow", markup=False,
                       highlight=False, soft_wrap=True)

    def error(self, text: str, hint: str | None = None) -> None:
        self.err.print("error: " + str(_safe(text)), style="bold red", markup=False,
                       highlight=False, soft_wrap=True)
        if hint:
            self.err.print("hint: " + hint, markup=False, highlight=False, soft_wrap=True)


CONSOLE_KEY = "rotate.console"


def console_for(ctx: Any, output: Any = "text", report_file: Path | None = None) -> Console:
    """The invocation's Console, remembered on the context so that the error handler in
    ``app.py`` answers in the same mode (a JSON error document under ``-o json``, and in the
    ``--report-file``)."""
    value = getattr(output, "value", output)
    console = Console(str(value), report_file)
    ctx.meta[CONSOLE_KEY] = console
    return console
