"""The dashboard's workflows through HTTP (the ASGI app over a real database, as in
test_web.py), on real workflows run by a real worker (``venturi.testing.drain``): a job
page's graph (its nodes, links, statuses, the current job), its steps and signals in the
timeline, what it waits for now; the workflows list's progress, filters and paging, and
its JSON twin; hostile kinds and step names escaped; bounds on a big workflow."""

from __future__ import annotations

import re

import asyncpg
import httpx
import pytest
from markupsafe import escape

import venturi
import venturi.web
from tests.support.flows import HOSTILE_KIND, HOSTILE_STEP, Flows, run_flows
from venturi import admin, sql
from venturi.web import graph

NODE = re.compile(r'<a href="([^"]+)" class="node n-(\w+)( current)?" data-job="(\d+)"')
ROW = re.compile(r'<tr data-id="(\d+)">')


@pytest.fixture
async def flows(dsn: str, conn: asyncpg.Connection, kinds: list[str]) -> Flows:
    return await run_flows(dsn, conn)


def nodes(page: str) -> dict[int, tuple[str, str, bool]]:
    """The graph's nodes: id -> (link, status, current)."""
    return {int(m[3]): (m[0], m[1], bool(m[2])) for m in NODE.findall(page)}


def section(page: str, ident: str) -> str:
    m = re.search(rf'<[^>]+id="{ident}"[^>]*>(.*?)</(?:p|div|li|span|ol)>', page, re.S)
    assert m is not None, f"no #{ident}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", m.group(1))).strip()


async def test_a_workflow_graph_draws_its_three_nodes_both_ways_from_any_of_them(
    flows: Flows, web: httpx.AsyncClient
) -> None:
    ids = [flows.extract, flows.transform, flows.load]
    for current in ids:
        r = await web.get(f"/jobs/{current}")
        assert r.status_code == 200, r.text
        drawn = nodes(r.text)
        assert sorted(drawn) == ids
        for i in ids:
            assert drawn[i] == (f"/jobs/{i}", "completed", i == current)
        # Three edges: extract before transform and load, transform before load.
        assert r.text.count('class="edge"') == 3
    r = await web.get(f"/jobs/{flows.extract}")
    assert section(r.text, "wf-dependents") == "2 jobs run after it"
    r = await web.get(f"/jobs/{flows.load}")
    assert section(r.text, "wf-dependencies") == "runs after 2 jobs"


async def test_a_parent_its_children_their_statuses_and_its_steps_in_the_timeline(
    flows: Flows, web: httpx.AsyncClient, conn: asyncpg.Connection
) -> None:
    r = await web.get(f"/jobs/{flows.order}")
    drawn = nodes(r.text)
    assert sorted(drawn) == sorted([flows.order, *flows.ships])
    assert drawn[flows.order][1:] == ("completed", True)
    assert all(drawn[c][1] == "completed" for c in flows.ships)
    assert section(r.text, "wf-children") == "3 of 3 children finished"
    # charge and the three spawns are steps, each in the timeline with its time.
    assert section(r.text, "wf-steps") == "4 steps recorded"
    steps = re.findall(r'<li class="event e-step" data-step="([^"]+)">', r.text)
    assert sorted(steps) == ["charge", "ship-0", "ship-1", "ship-2"]
    detail = await admin.show_job(conn, flows.order)
    assert detail is not None
    recorded = {s.name: s.recorded_at for s in detail.steps}
    step = re.search(r'data-step="charge">\s*<time class="at" datetime="([^"]+)"', r.text)
    assert step is not None and step.group(1) == recorded["charge"].isoformat()
    # A child's page: the same workflow, the child marked, its parent linked.
    child = await web.get(f"/jobs/{flows.ships[1]}")
    assert sorted(nodes(child.text)) == sorted(drawn)
    assert nodes(child.text)[flows.ships[1]][2] is True
    assert nodes(child.text)[flows.order][2] is False
    assert f'Spawned by <a href="/jobs/{flows.order}">job {flows.order}</a>' in child.text


async def test_what_a_waiting_job_waits_for_now(
    flows: Flows, web: httpx.AsyncClient, conn: asyncpg.Connection
) -> None:
    # A timer: its time, with its zone.
    r = await web.get(f"/jobs/{flows.sleeper}")
    timer = section(r.text, "waiting-timer")
    sleeper = await venturi.get_job(conn, flows.sleeper)
    assert sleeper is not None and sleeper.status == "waiting"
    detail = await admin.show_job(conn, flows.sleeper)
    assert detail is not None and detail.waiting_for is not None
    wake_at = detail.waiting_for.wake_at
    assert wake_at is not None
    assert timer.startswith(f"a timer, until {wake_at.strftime('%Y-%m-%d %H:%M:%S')} UTC")
    assert 'data-step="cool-off"' in r.text and "timer until" in r.text
    # Children: one of the two still to finish (its other child is done).
    r = await web.get(f"/jobs/{flows.gatherer}")
    assert section(r.text, "waiting-children") == "1 of 2 children, still to finish"
    drawn = nodes(r.text)
    assert {drawn[c][1] for c in flows.gathered} == {"completed", "waiting"}
    # A signal, by its name; once sent, in the timeline.
    r = await web.get(f"/jobs/{flows.approver}")
    assert section(r.text, "waiting-signal") == "the signal approval"
    assert await venturi.signal(conn, flows.approver, "approval", "maria")
    r = await web.get(f"/jobs/{flows.approver}")
    assert 'data-signal="approval"' in r.text
    assert section(r.text, "wf-signals") == "1 signal received"
    # Dependencies: a Workflow node after one that waits for a signal.
    r = await web.get(f"/jobs/{flows.after_gate}")
    assert section(r.text, "waiting-dependencies") == "1 of 1 dependencies, still to complete"
    assert nodes(r.text) == {
        flows.gate: (f"/jobs/{flows.gate}", "waiting", False),
        flows.after_gate: (f"/jobs/{flows.after_gate}", "waiting", True),
    }


async def test_hostile_kinds_and_step_names_are_escaped(
    flows: Flows, web: httpx.AsyncClient
) -> None:
    r = await web.get(f"/jobs/{flows.approver}")
    assert HOSTILE_STEP not in r.text and "<b>approve</b>" not in r.text
    assert f'data-step="{escape(HOSTILE_STEP)}"' in r.text  # the attribute, and the text:
    assert f'<code class="step-name">{escape(HOSTILE_STEP)}</code>' in r.text
    r = await web.get("/workflows")
    assert "<b>approve</b>" not in r.text
    assert f"{escape(HOSTILE_KIND)}</a></td>" in r.text


async def test_the_list_shows_roots_with_their_progress(
    flows: Flows, web: httpx.AsyncClient
) -> None:
    r = await web.get("/workflows")
    assert r.status_code == 200
    roots = [int(i) for i in ROW.findall(r.text)]
    # Roots only, newest first: no child and no later Workflow node.
    everyone = [flows.extract, flows.gate, flows.order, flows.gatherer, flows.sleeper]
    assert roots == sorted([*everyone, flows.approver], reverse=True)

    def cells(job: int) -> dict[str, str]:
        m = re.search(rf'<tr data-id="{job}">(.*?)</tr>', r.text, re.S)
        assert m is not None
        found = re.findall(
            r'<td class="(steps|children|nodes|waiting-for)[^"]*">(.*?)</td>', m.group(1), re.S
        )
        return {k: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", v)).strip() for k, v in found}

    assert cells(flows.order) == {
        "steps": "4",
        "children": "3 completed",
        "nodes": "—",
        "waiting-for": "—",
    }
    assert cells(flows.gatherer) == {
        "steps": "2",
        "children": "1 completed, 1 open",
        "nodes": "—",
        "waiting-for": "1 job",
    }
    assert cells(flows.extract)["nodes"] == "2 completed"
    assert cells(flows.sleeper)["steps"] == "2"  # prepare and the timer
    # What each waiting root waits for; nothing for a finished one.
    assert cells(flows.sleeper)["waiting-for"].startswith("timer in ")
    assert cells(flows.approver)["waiting-for"] == "signal approval"

    # The navigation leads here.
    assert '<a href="/workflows">Workflows</a>' in r.text


async def test_the_list_filters_by_status_and_kind_and_pages(
    flows: Flows, web: httpx.AsyncClient
) -> None:
    async def shown(query: str) -> list[int]:
        r = await web.get("/workflows" + query)
        assert r.status_code == 200, r.text
        return [int(i) for i in ROW.findall(r.text)]

    assert await shown("?status=waiting") == sorted(
        [flows.gatherer, flows.sleeper, flows.approver, flows.gate], reverse=True
    )
    assert await shown("?status=completed&kind=wfw_order") == [flows.order]
    assert await shown("?kind=wfw_ship") == []  # children are not workflows of their own
    assert await shown("?status=dead") == []
    r = await web.get("/workflows?status=nonsense")
    assert r.status_code == 400 and "status must be one of" in r.text
    # The JSON twin, paged by its cursor both ways.
    first = (await web.get("/api/workflows?limit=2")).json()
    assert [row["id"] for row in first["rows"]] == [flows.approver, flows.sleeper]
    assert first["newer"] is None and first["older"] == flows.sleeper
    second = (await web.get(f"/api/workflows?limit=2&before={first['older']}")).json()
    assert [row["id"] for row in second["rows"]] == [flows.gatherer, flows.order]
    back = (await web.get(f"/api/workflows?limit=2&after={second['newer']}")).json()
    assert [row["id"] for row in back["rows"]] == [flows.approver, flows.sleeper]
    order = next(row for row in second["rows"] if row["id"] == flows.order)
    assert (order["children"], order["children_finished"], order["steps"]) == (3, 3, 4)
    # The page's pager links to the older page.
    r = await web.get("/workflows")
    assert 'id="page-older"' not in r.text  # six roots: one page


async def test_a_big_workflow_is_drawn_bounded_and_says_what_it_left_out(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    # 300 sagas of two children each and 1 Workflow graph, by the benchmark's seed.
    await conn.execute(sql.statement("maintenance/workflows_seed_bulk"), 300, 1)
    page = await admin.list_workflows(conn, kind="saga_0", limit=1)
    root = page.rows[0].id
    detail = await admin.show_job(conn, root)
    assert detail is not None and len(detail.children) == 2
    # A parent of many children: re-parent every ship under one root (a fan-out of 600).
    await conn.execute("UPDATE venturi.jobs SET parent_id = $1 WHERE kind = 'ship'", root)
    r = await web.get(f"/jobs/{root}")
    drawn = nodes(r.text)
    assert len(drawn) == graph.MAX_NODES and root in drawn and drawn[root][2]
    assert section(r.text, "graph-left-out") == (
        f"{graph.MAX_NODES} jobs of this workflow drawn, the nearest to this one; "
        f"{601 - graph.MAX_NODES} more left out."
    )
    # The seed's sagas: 18 of the 300 wait, their children pending; the rest finished.
    assert section(r.text, "wf-children") == "564 of 600 children finished"


async def test_the_list_counts_by_outcome_and_searches(
    flows: Flows, web: httpx.AsyncClient, conn: asyncpg.Connection
) -> None:
    # A cancelled workflow: its waiting child is cancelled with it, its other completed.
    # It shows as one completed and one failed, in their colours, never as "2 of 2".
    [change] = await admin.cancel_jobs(conn, [flows.gatherer], operator="op")
    assert change.done
    r = await web.get("/workflows")
    row = re.search(rf'<tr data-id="{flows.gatherer}">(.*?)</tr>', r.text, re.S)
    assert row is not None
    children = re.search(r'<td class="children">(.*?)</td>', row.group(1), re.S)
    assert children is not None
    assert '<span class="o-done" title="completed">1 completed</span>' in children.group(1)
    assert '<span class="o-failed" title="dead or cancelled">1 failed</span>' in children.group(1)
    assert 'aria-label="1 completed, 1 failed, 0 open of 2"' in children.group(1)
    assert 'class="failed" x="30.0" y="0" width="30.0"' in children.group(1)
    api = (await web.get("/api/workflows?kind=wfw_gather")).json()["rows"][0]
    assert (api["children_completed"], api["children_failed"], api["children_finished"]) == (
        1,
        1,
        2,
    )

    async def found(query: str) -> list[int]:
        r = await web.get("/workflows?" + query)
        assert r.status_code == 200, r.text
        return [int(i) for i in ROW.findall(r.text)]

    assert await found("q=wfw_or") == [flows.order]  # a kind prefix
    assert await found("q=WFW_SL") == [flows.sleeper]  # any case
    assert await found(f"q={flows.extract}") == [flows.extract]  # an id
    assert await found("q=nothing-like-it") == []
    assert await found("q=wfw&status=waiting") == sorted([flows.sleeper, flows.gate], reverse=True)
    r = await web.get("/workflows?q=" + "x" * 201)
    assert r.status_code == 400
