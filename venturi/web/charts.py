"""Server-rendered bar charts: the geometry of an SVG, computed here, drawn by a template.

No chart library and no script: the page polls for new markup, so a chart is a pure
function of the counts per minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

WIDTH = 600
HEIGHT = 150
LEFT = 44  # room for the y-axis labels
BOTTOM = 20  # room for the time labels
TOP = 8


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True)
class Label:
    x: float
    text: str
    anchor: str  # SVG text-anchor: the end labels stay inside the picture


@dataclass(frozen=True)
class Chart:
    title: str
    css_class: str
    width: int
    height: int
    left: int
    plot_bottom: float
    bars: list[Bar]
    ticks: list[Tick]
    labels: list[Label]
    total: int
    peak: int


def _nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is >= value (at least 1)."""
    if value <= 1:
        return 1
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:g}M"
    if n >= 1000:
        return f"{n / 1000:g}k"
    return str(n)


def bar_chart(
    title: str,
    css_class: str,
    points: list[tuple[datetime, int]],
    unit: str,
    time_format: str = "%H:%M",
) -> Chart:
    """One bar per point (a minute, or a wider bucket, and its count), scaled to the
    largest count; times labelled with ``time_format``."""
    plot_w = WIDTH - LEFT
    plot_h = HEIGHT - TOP - BOTTOM
    bottom = float(TOP + plot_h)
    peak = max((n for _, n in points), default=0)
    top = _nice_ceiling(peak)
    slot = plot_w / max(1, len(points))
    bars = []
    for i, (minute, n) in enumerate(points):
        h = plot_h * n / top
        bars.append(
            Bar(
                x=round(LEFT + i * slot + slot * 0.1, 2),
                y=round(bottom - h, 2),
                width=round(slot * 0.8, 2),
                height=round(h, 2),
                title=f"{minute.astimezone().strftime(time_format)}: {n} {unit}",
            )
        )
    # A half-way tick only when it is a whole number (a peak of 1 would label it "0").
    fractions = (0.0, 0.5, 1.0) if top >= 2 else (0.0, 1.0)
    ticks = [Tick(round(bottom - plot_h * f, 2), _short(round(top * f))) for f in fractions]
    labels = []
    if points:
        last = len(points) - 1
        for i in sorted({0, len(points) // 2, last}):
            anchor = "start" if i == 0 else "end" if i == last else "middle"
            x = LEFT if i == 0 else WIDTH if i == last else LEFT + (i + 0.5) * slot
            labels.append(
                Label(round(x, 2), points[i][0].astimezone().strftime(time_format), anchor)
            )
    return Chart(
        title=title,
        css_class=css_class,
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        plot_bottom=bottom,
        bars=bars,
        ticks=ticks,
        labels=labels,
        total=sum(n for _, n in points),
        peak=peak,
    )
