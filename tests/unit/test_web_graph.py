"""The workflow graph's renderer (venturi.web.graph): a pure function from nodes and edges
to an SVG's geometry, and the template that draws it."""

from __future__ import annotations

import re

import jinja2
import pytest

from venturi.web import filters
from venturi.web.graph import MAX_NODES, NODE_H, DrawnJob, GraphError, layout


def node(i: int, status: str = "completed", label: str = "step") -> DrawnJob:
    return DrawnJob(i, label, status, f"/jobs/{i}")


def test_every_edge_points_down_and_layers_follow_the_longest_path() -> None:
    # 1 -> 2 -> 4, 1 -> 3 -> 4, 1 -> 4: 4 sits below both 2 and 3, not beside them.
    g = layout([node(i) for i in (4, 3, 2, 1)], [(1, 2), (1, 3), (2, 4), (3, 4), (1, 4)], 3)
    y = {b.node.id: b.y for b in g.boxes}
    x = {b.node.id: b.x for b in g.boxes}
    assert y[1] < y[2] == y[3] < y[4]
    assert x[2] < x[3]  # within a layer, id order
    assert [b.node.id for b in g.boxes if b.current] == [3]
    assert len(g.edges) == 5
    for e in g.edges:
        nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", e.path)]
        assert nums[1] < nums[-1]  # from a box's bottom down to the next one's top
    assert all(0 <= b.x and b.x + b.width <= g.width for b in g.boxes)
    assert max(b.y for b in g.boxes) + NODE_H <= g.height


def test_a_single_job_and_a_wide_fan_out() -> None:
    one = layout([node(7, "pending")], [])
    assert [(b.node.id, b.node.status) for b in one.boxes] == [(7, "pending")] and not one.edges
    fan = layout(
        [node(1)] + [node(i, "waiting") for i in range(2, 12)], [(1, i) for i in range(2, 12)]
    )
    ys = {b.y for b in fan.boxes if b.node.id != 1}
    assert len(ys) == 1 and fan.width > 10 * 150


def test_bad_graphs_are_refused() -> None:
    with pytest.raises(GraphError, match="cycle"):
        layout([node(1), node(2)], [(1, 2), (2, 1)])
    with pytest.raises(GraphError, match="not in the graph"):
        layout([node(1)], [(1, 9)])
    with pytest.raises(GraphError, match="itself"):
        layout([node(1)], [(1, 1)])
    with pytest.raises(GraphError, match="at most"):
        layout([node(i) for i in range(MAX_NODES + 1)], [])


def test_the_template_draws_linked_nodes_coloured_by_status_and_escapes_labels() -> None:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("venturi.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    filters.install(env)
    g = layout(
        [node(1, "completed", "<b>parent</b>"), node(2, "dead"), node(3, "waiting")],
        [(1, 2), (1, 3)],
        current=1,
    )
    out = env.from_string('{% import "_macros.html" as m %}{{ m.graph(g) }}').render(g=g)
    assert out.count('<a href="/jobs/') == 3
    assert 'class="node n-dead"' in out and 'class="node n-waiting"' in out
    assert 'class="node n-completed current"' in out
    assert "<b>parent" not in out and "&lt;b&gt;parent" in out
    assert out.count('class="edge"') == 2


def test_labels_are_clipped_to_the_box() -> None:
    g = layout([node(1, label="a.very.long.kind.name.that.does.not.fit.in.a.box")], [])
    assert g.boxes[0].text.endswith("…") and len(g.boxes[0].text) < 30


def _points(path: str, steps: int = 40) -> list[tuple[float, float]]:
    """Points along an SVG path of M, C and L commands (what the layout draws)."""
    tokens = re.findall(r"[MCL]|-?\d+(?:\.\d+)?", path)
    out: list[tuple[float, float]] = []
    here = (0.0, 0.0)
    k = 0
    while k < len(tokens):
        cmd = tokens[k]
        if cmd == "M":
            here = (float(tokens[k + 1]), float(tokens[k + 2]))
            out.append(here)
            k += 3
        elif cmd == "L":
            to = (float(tokens[k + 1]), float(tokens[k + 2]))
            out += [
                (here[0] + (to[0] - here[0]) * t / steps, here[1] + (to[1] - here[1]) * t / steps)
                for t in range(1, steps + 1)
            ]
            here = to
            k += 3
        else:
            assert cmd == "C", path
            c1, c2, to = (
                (float(tokens[k + 1 + 2 * j]), float(tokens[k + 2 + 2 * j])) for j in range(3)
            )
            for t in (i / steps for i in range(1, steps + 1)):
                u = 1 - t
                out.append(
                    tuple(  # type: ignore[arg-type]
                        u**3 * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t**3 * p3
                        for p0, p1, p2, p3 in zip(here, c1, c2, to, strict=True)
                    )
                )
            here = to
            k += 7
    return out


def assert_no_edge_crosses_a_box(ids: list[int], edges: list[tuple[int, int]]) -> None:
    g = layout([node(i) for i in ids], edges)
    assert len(g.edges) == len(edges)
    box = {b.node.id: b for b in g.boxes}
    for (a, b), e in zip(sorted(edges), g.edges, strict=True):
        points = _points(e.path)
        # It leaves a's bottom and reaches b's top.
        assert points[0] == (box[a].x + box[a].width / 2, box[a].y + box[a].height)
        assert points[-1] == (box[b].x + box[b].width / 2, box[b].y)
        for other in g.boxes:
            if other.node.id in (a, b):
                continue
            inside = [
                (x, y)
                for x, y in points
                if other.x - 1 < x < other.x + other.width + 1
                and other.y - 1 < y < other.y + other.height + 1
            ]
            assert not inside, f"edge {a} -> {b} runs through box {other.node.id}: {inside[:3]}"


def test_extract_transform_load_draws_the_long_edge_around_transform() -> None:
    # load comes after extract and after transform: extract -> load spans two layers
    # and must not run through transform's box.
    assert_no_edge_crosses_a_box([1, 2, 3], [(1, 2), (1, 3), (2, 3)])
    g = layout([node(i) for i in (1, 2, 3)], [(1, 2), (1, 3), (2, 3)])
    y = {b.node.id: b.y for b in g.boxes}
    assert y[1] < y[2] < y[3]


def test_diamonds_and_longer_skips_draw_every_edge_visibly() -> None:
    assert_no_edge_crosses_a_box([1, 2, 3, 4], [(1, 2), (1, 3), (2, 4), (3, 4)])
    # The diamond with its top joined to its bottom, and a chain with skips of two.
    assert_no_edge_crosses_a_box([1, 2, 3, 4], [(1, 2), (1, 3), (2, 4), (3, 4), (1, 4)])
    assert_no_edge_crosses_a_box(
        [1, 2, 3, 4, 5], [(1, 2), (2, 3), (3, 4), (4, 5), (1, 4), (2, 5), (1, 5)]
    )
    # Two workflows side by side, one of them an ETL.
    assert_no_edge_crosses_a_box(
        [1, 2, 3, 10, 11, 12, 13],
        [(1, 2), (1, 3), (2, 3), (10, 11), (10, 12), (11, 13), (12, 13), (10, 13)],
    )
