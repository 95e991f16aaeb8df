"""A workflow drawn as a graph: the geometry of an inline SVG, computed here from nodes
and edges, drawn by a template (``_macros.html``'s ``graph``). No script, no library.

A pure function of its input, so that the job page can draw a workflow from whatever
the workflow statements return: each node a job (its id, kind, status, and a link),
each edge ``(from, to)`` meaning "from comes before to" (a parent before its children,
a dependency before the job that waits for it). Layers by longest path from the roots,
so every edge points down; within a layer, nodes in id order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NODE_W = 150
NODE_H = 38
GAP_X = 24
GAP_Y = 46
MARGIN = 10
# A graph of more nodes is not drawn (the page lists them instead): a picture of
# hundreds of boxes helps nobody, and the layout is quadratic in the worst case.
MAX_NODES = 200


@dataclass(frozen=True)
class Node:
    """A job in the workflow: ``href`` its page, ``label`` its short text (the kind)."""

    id: int
    label: str
    status: str
    href: str


@dataclass(frozen=True)
class Box:
    node: Node
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


def layout(
    nodes: Iterable[Node], edges: Iterable[tuple[int, int]], current: int | None = None
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
    rows: dict[int, list[int]] = {}
    for i in ids:
        rows.setdefault(layer[i], []).append(i)
    widest = max((len(r) for r in rows.values()), default=0)
    width = 2 * MARGIN + widest * NODE_W + max(0, widest - 1) * GAP_X
    height = 2 * MARGIN + len(rows) * NODE_H + max(0, len(rows) - 1) * GAP_Y
    place: dict[int, tuple[float, float]] = {}
    boxes = []
    for depth, row in sorted(rows.items()):
        used = len(row) * NODE_W + (len(row) - 1) * GAP_X
        left = (width - used) / 2  # each layer centred
        y = MARGIN + depth * (NODE_H + GAP_Y)
        for k, i in enumerate(row):
            x = round(left + k * (NODE_W + GAP_X), 2)
            place[i] = (x, y)
            node = by_id[i]
            boxes.append(
                Box(node, x, y, NODE_W, NODE_H, i == current, _clip(f"{i} {node.label}", NODE_W))
            )
    drawn = []
    for a, b in pairs:
        (ax, ay), (bx, by) = place[a], place[b]
        x1, y1 = ax + NODE_W / 2, ay + NODE_H
        x2, y2 = bx + NODE_W / 2, by
        mid = (y1 + y2) / 2
        drawn.append(Edge(f"M{x1:g},{y1:g} C{x1:g},{mid:g} {x2:g},{mid:g} {x2:g},{y2:g}"))
    return Graph(width, height, boxes, drawn)
