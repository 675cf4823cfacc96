"""The steps of a run on a terminal, readable at any width: the report's table and the live
progress view share it.

Two layouts of the same rows (:class:`StepRow`):

- **wide**, when every name column fits whole beside at least :data:`MIN_DETAIL` columns of
  detail: one table row per step — ``#  stage  step  target  status  time  detail`` — the
  detail wrapping in its column;
- **narrow** otherwise (an 80-column terminal): the stage becomes a heading line above its
  steps, each step is one line ``#  step  target  status  time``, and its detail follows on
  lines of its own, indented under the step name and wrapped to the width.  No column is
  ever cut to ``d…``, and no detail disappears.

Only names, statuses, times and the engine's safe details reach it — never a value.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rotate.cli.columns import aligned, stage_label

#: the least room the wide layout leaves the detail column
MIN_DETAIL = 24
#: between two columns of the wide table (rich's SIMPLE_HEAD box: a padding, a rule, a padding)
GAP = 3
COLUMNS = ("#", "stage", "step", "target", "status", "time", "detail")
STYLE = {"failed": "bold red", "done": "green", "skipped": "dim", "running": "bold"}


@dataclass(frozen=True)
class StepRow:
    """One step as shown: its cells, already text."""

    index: str
    stage: int
    kind: str
    target: str
    status: str
    time: str = ""
    detail: str = ""

    def cells(self) -> tuple[str, ...]:
        return (self.index, stage_label(self.stage), self.kind, self.target, self.status,
                self.time, self.detail)


def fits_wide(rows: Sequence[StepRow], width: int) -> bool:
    """Whether the one-row-per-step table fits ``width`` with every name whole."""
    cells = [COLUMNS, *(r.cells() for r in rows)]
    names = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    detail = min(max(len(c[-1]) for c in cells), MIN_DETAIL)
    return sum(names) + detail + GAP * (len(COLUMNS) - 1) <= width


def steps_view(rows: Sequence[StepRow], width: int, title: str | None = None) -> Any:
    """The rows in the layout ``width`` allows (see module doc)."""
    if fits_wide(rows, width):
        return _wide(rows, title)
    return _narrow(rows, width, title)


def _wide(rows: Sequence[StepRow], title: str | None) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False)
    for column in COLUMNS:  # the names whole (fits_wide made room), the detail wraps
        table.add_column(column, no_wrap=column != "detail",
                         overflow="fold" if column == "detail" else "ellipsis")
    for row in rows:
        table.add_row(*row.cells(), style=STYLE.get(row.status))
    return table


def narrow_lines(rows: Sequence[StepRow], width: int) -> list[tuple[str, str | None]]:
    """The narrow layout as (line, style) pairs: pure, so golden tests can read it."""
    body = aligned([("#", "step", "target", "status", "time"),
                    *((r.index, r.kind, r.target, r.status, r.time) for r in rows)])
    indent = " " * (2 + max([1, *(len(r.index) for r in rows)]) + 2)
    out: list[tuple[str, str | None]] = [(body[0], "bold")]
    stage: int | None = None
    for row, line in zip(rows, body[1:], strict=True):
        if row.stage != stage:
            stage = row.stage
            out.append((stage_label(stage), "bold"))
        style = STYLE.get(row.status)
        out.append((line, style))
        if row.detail:
            out += [(indent + piece, style or "dim") for piece in textwrap.wrap(
                row.detail, max(MIN_DETAIL, width - len(indent)), break_on_hyphens=False)]
    return out


def _narrow(rows: Sequence[StepRow], width: int, title: str | None) -> Any:
    from rich.console import Group
    from rich.text import Text

    lines = [Text(title, style="italic")] if title else []
    lines += [Text(line, style=style or "") for line, style in narrow_lines(rows, width)]
    return Group(*lines)
