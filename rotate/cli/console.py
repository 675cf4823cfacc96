"""The one object every byte of CLI output goes through.

Rules (cli.md "Human output"):

* ``-o json``: stdout carries exactly one JSON document and nothing else. :meth:`json`
  refuses a second document, and every human line goes to stderr.
* text: the result (a table, a plan, a report) goes to stdout — it is the only output;
  progress, notes, warnings and errors always go to stderr so a pipe gets only the result.
* colour follows ``NO_COLOR`` and TTY detection (rich does both); ``COLUMNS`` fixes the width
  (the golden tests run with ``NO_COLOR=1 COLUMNS=100``).

Plain lines are printed with markup and highlighting off and without wrapping, so that text
such as ``[2/14]`` or a target name is printed as is and piped output is stable.

Secrets: nothing should hand this object a :class:`~rotate.core.secret.Secret`; if something
does, it is rendered through ``str()`` — the mask — and never revealed (JSON included).
"""

from __future__ import annotations

import json as _json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rotate.core.secret import Secret

if TYPE_CHECKING:
    from rich.console import Console as RichConsole
    from rich.console import RenderableType


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

    def __init__(self, output: str = "text") -> None:
        self.json_mode = output == "json"
        self._out: RichConsole | None = None
        self._err: RichConsole | None = None
        self._json_written = False

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
        """Plain result lines (no markup, no wrapping)."""
        for line in lines:
            self.out.print(_safe(line), markup=False, highlight=False, soft_wrap=True)

    def render(self, renderable: RenderableType) -> None:
        """A rich renderable (a table on a terminal)."""
        self.out.print(_safe(renderable))

    def json(self, document: Any) -> None:
        """The one JSON document of this invocation, on stdout."""
        if self._json_written:
            raise RuntimeError("a second JSON document would break `-o json` consumers")
        self._json_written = True
        sys.stdout.write(_json.dumps(document, indent=2, default=_json_default) + "\n")
        sys.stdout.flush()

    @property
    def json_written(self) -> bool:
        return self._json_written

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


def console_for(ctx: Any, output: Any = "text") -> Console:
    """The invocation's Console, remembered on the context so that the error handler in
    ``app.py`` answers in the same mode (a JSON error document under ``-o json``)."""
    value = getattr(output, "value", output)
    console = Console(str(value))
    ctx.meta[CONSOLE_KEY] = console
    return console
