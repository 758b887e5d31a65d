"""Charts drawn on the server as SVG: no script, no external asset.

Each data point is an element of class `point` with `data-label` and `data-value`, and a
`<title>` a browser shows on hover; every label is shown on one line (control and reversing
characters escaped, as `shown_text.one_line` writes them) and escaped.

>>> svg = columns([("2026-11-29", 350), ("2026-11-30", 7)], title="Tokens per day")
>>> svg.count('class="point"')
2
>>> "&lt;b&gt;" in rows([("<b>", 1)], title="Tokens per user")
True
>>> 'data-label="a\\\\u202eb"' in rows([("a\\u202eb", 1)], title="Tokens per user")
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from markupsafe import Markup

from ..shown_text import one_line

Point = tuple[str, float]
#: A point of `rows`: its label None is the one without a name (`unnamed`).
Row = tuple[str | None, float]

_LEFT, _BOTTOM, _TOP, _RIGHT = 64, 36, 28, 12


def nice_ceiling(value: float) -> float:
    """A round number at or above `value`, for the top of an axis.

    >>> [nice_ceiling(v) for v in (0, 7, 350, 1357)]
    [1.0, 10.0, 500.0, 2000.0]
    """
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def figure(value: float) -> str:
    """A count as an axis shows it: 950, 1.2k, 3.4M.

    >>> [figure(v) for v in (950, 1200, 3_400_000, 2.5, 0.25)]
    ['950', '1.2k', '3.4M', '2.5', '0.25']
    """
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.2f}".rstrip("0").rstrip(".") + suffix
    return f"{value:.2f}".rstrip("0").rstrip(".") if value % 1 else str(int(value))


def _frame(width: int, height: int, title: str, body: list[str]) -> Markup:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _point(
    x: float, y: float, w: float, h: float, label: str | None, value: float, unit: str, name: str
) -> str:
    """A point's bar, named `name` on hover; `label` None (`rows`' unnamed point): in class
    `unnamed`, its `data-label` empty."""
    text = f"{name}: {value:,.0f}{unit}"
    return (
        f'<rect class="point{" unnamed" if label is None else ""}" x="{x:.1f}" y="{y:.1f}" '
        f'width="{max(w, 1):.1f}" height="{max(h, 0):.1f}" '
        f'data-label="{escape(one_line(label or ""))}" data-value="{value:.0f}">'
        f"<title>{escape(text)}</title></rect>"
    )


def columns(
    points: Sequence[Point], *, title: str, unit: str = "", width: int = 720, height: int = 240
) -> Markup:
    """Vertical bars, one per point, left to right (e.g. one per day); each point's value
    in its `data-value`, exactly.

    >>> 'data-value="78143750"' in columns([("2026-12-01", 78_143_750)], title="tokens")
    True
    """
    body: list[str] = []
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    top = nice_ceiling(max((value for _, value in points), default=0))
    if top < 4 and all(value % 1 == 0 for _, value in points):
        top = 4.0  # counts: whole numbers on the axis
    for step in range(5):
        value = top * step / 4
        y = _TOP + plot_h - plot_h * step / 4
        body.append(
            f'<line class="grid" x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(figure(value))}</text>"
        )
    if not points:
        body.append(
            f'<text class="empty" x="{width / 2:.0f}" y="{height / 2:.0f}" '
            f'text-anchor="middle">no data</text>'
        )
        return _frame(width, height, title, body)
    slot = plot_w / len(points)
    every = max(1, math.ceil(len(points) / 8))  # at most about eight labels under the axis
    for index, (label, value) in enumerate(points):
        h = plot_h * value / top
        x = _LEFT + index * slot + slot * 0.15
        name = one_line(label)
        body.append(_point(x, _TOP + plot_h - h, slot * 0.7, h, label, value, unit, name))
        if index % every == 0:
            body.append(
                f'<text class="axis" x="{_LEFT + index * slot + slot / 2:.1f}" '
                f'y="{height - _BOTTOM + 16}" text-anchor="middle">{escape(name)}</text>'
            )
    return _frame(width, height, title, body)


def rows(
    points: Sequence[Row],
    *,
    title: str,
    unit: str = "",
    width: int = 720,
    bar: int = 22,
    unnamed: str = "(none)",
) -> Markup:
    """Horizontal bars, one per point, top to bottom (e.g. one per user). A point labelled
    None (e.g. the sessions without a user) is named `unnamed`, in class `unnamed`
    (italics), its `data-label` empty: told apart from a point of a label that reads alike.

    >>> 'class="point unnamed" ' in rows([(None, 5)], title="Tokens", unnamed="(no user)")
    True
    """
    label_w = 180
    height = _TOP + max(len(points), 1) * (bar + 6) + 8
    top = nice_ceiling(max((value for _, value in points), default=0))
    plot_w = width - label_w - _RIGHT - 70
    body: list[str] = []
    if not points:
        body.append(f'<text class="empty" x="{width / 2:.0f}" y="{_TOP + 16}">no data</text>')
    for index, (label, value) in enumerate(points):
        y = _TOP + index * (bar + 6)
        w = plot_w * value / top
        name = unnamed if label is None else one_line(label)
        shown = name if len(name) <= 24 else name[:23] + "…"
        kind = "axis unnamed" if label is None else "axis"
        body.append(
            f'<text class="{kind}" x="{label_w - 8}" y="{y + bar * 0.7:.1f}" text-anchor="end">'
            f"{escape(shown)}</text>"
            + _point(label_w, y, w, bar, label, value, unit, name)
            + f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + bar * 0.7:.1f}">'
            f"{escape(figure(value))}</text>"
        )
    return _frame(width, height, title, body)
