"""A workflow drawn as a graph: the geometry of an inline SVG, computed here from nodes
and edges, drawn by a template (``_macros.html``'s ``graph``). No script, no library.

A pure function of its input, so that the job page can draw a workflow from whatever
the workflow statements return: each node a job (its id, kind, status, and a link),
each edge ``(from, to)`` meaning "from comes before to" (a parent before its children,
a dependency before the job that waits for it). Layers by longest path from the roots,
so every edge points down. An edge that spans several layers (extract -> load beside
extract -> transform -> load) takes a lane of its own in each layer it crosses, a slot
no box sits in, so that it never runs through a box (the layered layout's "dummy
nodes"); within a layer, boxes and lanes go by the mean position of what comes before
them, then by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NODE_W = 150
NODE_H = 38
GAP_X = 24
GAP_Y = 46
MARGIN = 10
# The width of the lane a long edge takes through a layer it crosses.
LANE_W = 16
# A graph of more nodes is not drawn (the page lists them instead): a picture of
# hundreds of boxes helps nobody, and the layout is quadratic in the worst case.
MAX_NODES = 200


@dataclass(frozen=True)
class DrawnJob:
    """A job of the workflow to draw as a node: ``href`` its page, ``label`` its short
    text (the kind)."""

    id: int
    label: str
    status: str
    href: str


@dataclass(frozen=True)
class Box:
    node: DrawnJob
    x: float
    y: float
    width: float
    height: float
    current: bool
    text: str  # the label clipped to the box


@dataclass(frozen=True)
class Edge:
    path: str  # an SVG path from the bottom of one box to the top of the other


@dataclass(frozen=True)
class Graph:
    width: float
    height: float
    boxes: list[Box]
    edges: list[Edge]


class GraphError(ValueError):
    """The nodes and edges cannot be drawn: an unknown node, a cycle, too many nodes."""


def _layers(ids: list[int], edges: Sequence[tuple[int, int]]) -> dict[int, int]:
    """Each node's layer: the length of the longest path from a root to it."""
    incoming: dict[int, list[int]] = {i: [] for i in ids}
    outgoing: dict[int, list[int]] = {i: [] for i in ids}
    for a, b in edges:
        outgoing[a].append(b)
        incoming[b].append(a)
    waiting = {i: len(incoming[i]) for i in ids}
    ready = sorted(i for i in ids if waiting[i] == 0)
    layer = dict.fromkeys(ids, 0)
    seen = 0
    while ready:
        node = ready.pop(0)
        seen += 1
        for nxt in outgoing[node]:
            layer[nxt] = max(layer[nxt], layer[node] + 1)
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                ready.append(nxt)
    if seen != len(ids):
        raise GraphError("the edges hold a cycle: a workflow is a directed acyclic graph")
    return layer


def _clip(text: str, width: float) -> str:
    fits = max(4, int((width - 12) / 6.6))  # 11px monospace
    return text if len(text) <= fits else text[: fits - 1] + "…"


# A slot of a layer: a box (its job id) or a lane of a long edge ((before, after), k).
Slot = int | tuple[tuple[int, int], int]


def _slots(
    ids: list[int], pairs: list[tuple[int, int]], layer: dict[int, int]
) -> tuple[dict[int, list[Slot]], dict[Slot, list[Slot]]]:
    """Each layer's slots in drawing order, and each slot's slots in the layer above it
    (a box's parents and the lanes leading to it; a lane's box or lane above)."""
    rows: dict[int, list[Slot]] = {}
    above: dict[Slot, list[Slot]] = {}
    for i in ids:
        rows.setdefault(layer[i], []).append(i)
        above.setdefault(i, [])
    for a, b in pairs:
        prev: Slot = a
        for depth in range(layer[a] + 1, layer[b]):
            lane: Slot = ((a, b), depth)
            rows.setdefault(depth, []).append(lane)
            above[lane] = [prev]
            prev = lane
        above[b].append(prev)
    placed: dict[Slot, int] = {}
    for depth in sorted(rows):

        def key(slot: Slot) -> tuple[float, int, int, int]:
            up = [placed[u] for u in above[slot]]
            mean = sum(up) / len(up) if up else 0.0
            if isinstance(slot, int):
                return (mean, 0, slot, 0)
            (a, b), _ = slot
            return (mean, 1, a, b)

        rows[depth].sort(key=key)
        for k, slot in enumerate(rows[depth]):
            placed[slot] = k
    return rows, above


def _width(slot: Slot) -> float:
    return NODE_W if isinstance(slot, int) else LANE_W


def layout(
    nodes: Iterable[DrawnJob], edges: Iterable[tuple[int, int]], current: int | None = None
) -> Graph:
    """The picture of ``nodes`` joined by ``edges`` (each ``(before, after)``);
    ``current`` (a node id) is drawn bold. ``GraphError`` for an edge to an unknown
    node, a cycle, or more than ``MAX_NODES`` nodes."""
    by_id = {n.id: n for n in nodes}
    if len(by_id) > MAX_NODES:
        raise GraphError(f"{len(by_id)} nodes: at most {MAX_NODES} are drawn")
    pairs = sorted(set(edges))
    for a, b in pairs:
        if a not in by_id or b not in by_id:
            raise GraphError(f"edge {a} -> {b} names a node that is not in the graph")
        if a == b:
            raise GraphError(f"edge {a} -> {b} joins a node to itself")
    ids = sorted(by_id)
    layer = _layers(ids, pairs)
    rows, _ = _slots(ids, pairs, layer)
    used = {d: sum(map(_width, r)) + max(0, len(r) - 1) * GAP_X for d, r in rows.items()}
    width = 2 * MARGIN + max(used.values(), default=0)
    height = 2 * MARGIN + len(rows) * NODE_H + max(0, len(rows) - 1) * GAP_Y
    centre: dict[Slot, float] = {}
    boxes = []
    for depth, row in sorted(rows.items()):
        x = (width - used[depth]) / 2  # each layer centred
        y = MARGIN + depth * (NODE_H + GAP_Y)
        for slot in row:
            centre[slot] = round(x + _width(slot) / 2, 2)
            if isinstance(slot, int):
                node = by_id[slot]
                text = _clip(f"{slot} {node.label}", NODE_W)
                boxes.append(Box(node, round(x, 2), y, NODE_W, NODE_H, slot == current, text))
            x += _width(slot) + GAP_X
    drawn = [Edge(_path(a, b, layer, centre)) for a, b in pairs]
    return Graph(width, height, boxes, drawn)


def _top(depth: int) -> float:
    return MARGIN + depth * (NODE_H + GAP_Y)


def _path(a: int, b: int, layer: dict[int, int], centre: dict[Slot, float]) -> str:
    """From the bottom of ``a``'s box down to the top of ``b``'s: a curve across each
    gap between layers, a straight line down each lane in between."""
    xs = [centre[a]]
    xs += [centre[((a, b), d)] for d in range(layer[a] + 1, layer[b])]
    xs.append(centre[b])
    x1, y1 = xs[0], _top(layer[a]) + NODE_H
    parts = [f"M{x1:g},{y1:g}"]
    for k, x2 in enumerate(xs[1:]):
        y2 = _top(layer[a] + 1 + k)
        mid = (y1 + y2) / 2
        parts.append(f"C{x1:g},{mid:g} {x2:g},{mid:g} {x2:g},{y2:g}")
        if k < len(xs) - 2:  # through a lane: straight down to the layer's bottom
            y2 += NODE_H
            parts.append(f"L{x2:g},{y2:g}")
        x1, y1 = x2, y2
    return " ".join(parts)
