"""The pieces every view shares: stage labels, aligned plain columns, the shape of a rich
table and a check's mark.

Below :mod:`rotate.cli.render`, :mod:`rotate.cli.render_plan` and
:mod:`rotate.cli.step_table`, which use them; rich is imported only when a table is built
(a pipe never pays for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from rotate.engine.model import Check

STAGE_LABEL = {0: "⓪ preflight", 1: "① backend", 2: "② sync", 3: "③ provider", 4: "④ consumers"}


def stage_label(stage: int) -> str:
    return STAGE_LABEL.get(stage, str(stage))


def aligned(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Rows as lines with columns padded to the widest cell (trailing blanks dropped)."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
            for r in rows]


WRAPPING = frozenset({"detail", "problem", "action", "consumers", "provider(s)"})


def new_table(title: str | None, columns: Sequence[str]) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False)
    for column in columns:
        # Names (targets, run ids, check ids) stay on one line; prose columns wrap.
        table.add_column(column, no_wrap=column not in WRAPPING)
    return table


def check_mark(check: Check) -> str:
    if check.ok:
        return "ok"
    return "FAIL" if check.fatal else "warn"
