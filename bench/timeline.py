"""The timeline picture: one panel per run kind, on one time scale, as hand-written SVG.

Each panel has the run's steps as bars (one lane per step kind), then one lane per service
with its pods, one row per overlapping pod (grey: created → Ready, green: Ready →
terminating), and under them a strip of red ticks, one per failed request.
Times are seconds since the load started (t=0 of the panel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

from bench.observed import PodLife


@dataclass(frozen=True)
class Step:
    kind: str
    target: str
    start: float
    end: float


@dataclass(frozen=True)
class Panel:
    title: str
    t0: float
    t1: float
    command: tuple[float, float]  # the measured command's start and end
    steps: Sequence[Step]
    pods: Sequence[PodLife]
    failures: dict[str, list[float]] = field(default_factory=dict)
    services: Sequence[str] = ()


LANE, GAP, LEFT, RIGHT, TOP, POD_ROW, FAIL_ROW = 16, 4, 150, 20, 34, 10, 7
WIDTH = 1100
COLORS = {"backend": "#6a51a3", "sync": "#3182bd", "provider": "#e6550d", "config": "#31a354",
          "token": "#756bb1", "consumer": "#fd8d3c", "readyz": "#636363", "preflight": "#bdbdbd",
          "start-up+plan": "#bdbdbd", "exit": "#bdbdbd"}


def _color(kind: str) -> str:
    return COLORS.get(kind.split(".", 1)[0], "#969696")


def _lanes(panel: Panel) -> tuple[list[str], list[str]]:
    kinds = list(dict.fromkeys(s.kind for s in panel.steps))
    busy = {p.app for p in panel.pods if p.created is not None or p.gone is not None}
    services = [s for s in panel.services if s in busy or panel.failures.get(s)]
    return kinds, services


def _panel(panel: Panel, y: float, span: float) -> tuple[list[str], float]:
    scale = (WIDTH - LEFT - RIGHT) / span

    def x(t: float) -> float:
        return LEFT + max(0.0, min(span, t - panel.t0)) * scale

    out = [f'<text x="8" y="{y + 14}" font-weight="bold">{escape(panel.title)}</text>']
    y += 22
    c0, c1 = panel.command
    kinds, services = _lanes(panel)
    top, at = y, len(out)
    for kind in kinds:
        out.append(f'<text x="{LEFT - 6}" y="{y + 12}" text-anchor="end">{escape(kind)}</text>')
        for s in (s for s in panel.steps if s.kind == kind):
            w = max(1.5, x(s.end) - x(s.start))
            out.append(f'<rect x="{x(s.start):.1f}" y="{y + 2}" width="{w:.1f}" '
                       f'height="{LANE - 4}" fill="{_color(kind)}"><title>{escape(s.kind)} '
                       f'{escape(s.target)}: {s.end - s.start:.2f} s</title></rect>')
        y += LANE + GAP
    y += 8
    for svc in services:
        rows = _rows([p for p in panel.pods if p.app == svc], panel)
        lane = max(LANE, len(rows) * POD_ROW + 2) + FAIL_ROW
        out.append(f'<text x="{LEFT - 6}" y="{y + lane / 2 + 4:.0f}" text-anchor="end">'
                   f'{escape(svc)}</text>')
        for r, row in enumerate(rows):
            for p in row:
                out += _pod(p, panel, x, y + 2 + r * POD_ROW)
        for t in panel.failures.get(svc, []):
            out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{y + lane - FAIL_ROW}" '
                       f'y2="{y + lane}" stroke="#d7191c" stroke-width="1"/>')
        y += lane + GAP
    out.insert(at, f'<rect x="{x(c0):.1f}" y="{top - 2}" width="{x(c1) - x(c0):.1f}" '
                   f'height="{y - top + 2}" fill="#f2f2f2"/>')
    quiet = [s for s in panel.services if s not in services]
    if quiet:
        out.append(f'<text x="{LEFT}" y="{y + 10}" fill="#555">{len(quiet)} other service(s) '
                   f'({escape(", ".join(quiet))}): no pod change, no failed request</text>')
        y += 16
    return out, y + 14


def _rows(pods: Sequence[PodLife], panel: Panel) -> list[list[PodLife]]:
    """Pods of one service on as few rows as overlap allows (a surge pod gets its own)."""
    rows: list[list[PodLife]] = []
    ends: list[float] = []
    for p in sorted(pods, key=lambda p: p.created if p.created is not None else panel.t0):
        start = p.created if p.created is not None else panel.t0
        end = p.gone if p.gone is not None else panel.t1
        for i, e in enumerate(ends):
            if e <= start:
                rows[i].append(p)
                ends[i] = end
                break
        else:
            rows.append([p])
            ends.append(end)
    return rows


def _pod(p: PodLife, panel: Panel, x: Callable[[float], float], y: float) -> list[str]:
    start = p.created if p.created is not None else panel.t0
    end = p.gone if p.gone is not None else panel.t1
    ready = p.ready if p.ready is not None else (start if p.created is None else None)
    if ready is None or ready > end:
        return [_bar(x(start), x(end), y, "#cccccc", f"{p.name}: never Ready")]
    return [_bar(x(start), x(ready), y, "#cccccc", f"{p.name} starting"),
            _bar(x(ready), x(end), y, "#74c476", f"{p.name} Ready")]


def _bar(x0: float, x1: float, y: float, fill: str, title: str) -> str:
    return (f'<rect x="{x0:.1f}" y="{y}" width="{max(0.0, x1 - x0):.1f}" '
            f'height="{POD_ROW - 2}" fill="{fill}"><title>{escape(title)}</title></rect>')


def _axis(y: float, span: float) -> list[str]:
    scale = (WIDTH - LEFT - RIGHT) / span
    step = 1 if span <= 15 else 2 if span <= 40 else 5 if span <= 100 else 10
    out = [f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#000"/>']
    t = 0
    while t <= span:
        px = LEFT + t * scale
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y}" y2="{y + 4}" stroke="#000"/>')
        out.append(f'<text x="{px:.1f}" y="{y + 16}" text-anchor="middle">{t}</text>')
        t += step
    out.append(f'<text x="{WIDTH - RIGHT}" y="{y + 30}" text-anchor="end">seconds since the '
               'load started</text>')
    return out


def _legend(y: float) -> list[str]:
    items = [("#f2f2f2", "the measured command runs"), ("#cccccc", "pod created, not Ready"),
             ("#74c476", "pod Ready (serving)"), ("#d7191c", "failed /work request")]
    out, x = [], LEFT
    for color, label in items:
        out.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{color}" '
                   'stroke="#999"/>')
        out.append(f'<text x="{x + 16}" y="{y + 11}">{escape(label)}</text>')
        x += 40 + 7 * len(label)
    return out


def render(panels: Sequence[Panel], heading: str) -> str:
    span = max((p.t1 - p.t0 for p in panels), default=1.0) or 1.0
    body: list[str] = [f'<text x="8" y="20" font-size="15" font-weight="bold">'
                       f'{escape(heading)}</text>']
    y: float = TOP
    for panel in panels:
        part, y = _panel(panel, y, span)
        body += part
    body += _axis(y, span)
    body += _legend(y + 40)
    height = y + 64
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
            f'viewBox="0 0 {WIDTH} {height:.0f}" font-family="sans-serif" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="#fff"/>\n' + "\n".join(body) + "\n</svg>\n")
