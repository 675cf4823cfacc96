"""The two pieces every text view shares: stage labels and aligned plain columns.

Below :mod:`rotate.cli.render` and :mod:`rotate.cli.step_table`, which both use them.
"""

from __future__ import annotations

from collections.abc import Sequence

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
