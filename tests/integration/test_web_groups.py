"""The dashboard's groups (SPEC 13) at request level, over a real database: the kind
page's groups (top by pending and by claimed, a search, paging, cap, weight, state and
why they wait) and their JSON twin, the pause and resume buttons (CSRF, token, read-only,
bad input refused before anything is written, nothing journaled), a job's group and why
it waits on its page, and the jobs list filtered by group."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import asyncpg
import httpx
import pytest

import venturi
import venturi.web
from tests.support import Item
from tests.support.web import CSRF, client, csrf_of
from venturi import Context, JobSpec, admin, db
from venturi.formatting import to_json

S = "venturi"
TOKEN = "t0ken-for-the-group-tests-0123456789"


@pytest.fixture
def export(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind="export", group_cap=2)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def claim_all(conn: Any, kind: str, cap: int) -> int:
    """Claim grouped jobs of ``kind`` as workers would, until nothing more is claimable."""
    claimed = 0
    while True:
        got, _ = await db.groups.claim_grouped(
            conn,
            schema=S,
            claimant=db.Claimant("w:1"),
            kind=kind,
            lease=600.0,
            floor=0,
            limit=10,
            limits=db.groups.GroupLimits(cap, None, None),
        )
        claimed += len(got.claimed)
        if not got.claimed and not got.woken:
            return claimed


async def seed(conn: Any, export: venturi.Task[Item]) -> None:
    """acme: 2 claimed (its cap), 3 pending; beta: 2 claimed, 1 pending; gamma: 1
    claimed; delta: 4 pending, enqueued after the claims."""
    jobs = [
        export.job(Item(i), group=g)
        for g, n in (("acme", 5), ("beta", 3), ("gamma", 1))
        for i in range(n)
    ]
    await venturi.enqueue_many(conn, jobs)
    assert await claim_all(conn, "export", 2) == 5
    await venturi.enqueue_many(conn, [export.job(Item(i), group="delta") for i in range(4)])


def groups_shown(page: str) -> list[str]:
    return re.findall(r'<tr data-group="([^"]*)">', page)


def row_of(page: str, group: str) -> str:
    m = re.search(rf'<tr data-group="{group}">(.*?)</tr>', page, re.S)
    assert m, group
    return m.group(1)


async def journal_rows(conn: Any) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM venturi.journal"))


async def test_kind_page_lists_groups_by_pending_and_by_claimed_with_search_and_paging(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    await seed(conn, export)
    await venturi.set_group(conn, "export", "beta", weight=3, cap=4)
    r = await web.get("/kind", params={"name": "export"})
    assert r.status_code == 200
    assert groups_shown(r.text) == ["delta", "acme", "beta", "gamma"]
    acme = row_of(r.text, "acme")
    cells = re.findall(r'<td class="num">(.*?)</td>', acme)
    assert cells[:3] == ["3", "2", '2 <span class="muted">(task)</span>']
    assert "group at its cap" in acme and 'action="/kinds/groups/pause"' in acme
    assert 'href="/jobs?kind=export&amp;group=acme"' in acme
    beta = row_of(r.text, "beta")
    assert re.findall(r'<td class="num">(.*?)</td>', beta)[2:4] == ["4", "3"]
    assert '<td class="waits"></td>' in beta  # under its own cap of 4
    r = await web.get("/kind", params={"name": "export", "group_order": "claimed"})
    assert groups_shown(r.text) == ["acme", "beta", "gamma", "delta"]
    r = await web.get("/kind", params={"name": "export", "group_q": "ta"})
    assert groups_shown(r.text) == ["delta", "beta"]
    assert 'value="ta"' in r.text
    r = await web.get("/kind", params={"name": "export", "group_q": "nothing-like-it"})
    assert groups_shown(r.text) == [] and "no group matches" in r.text
    # A hostile group name is escaped everywhere it is shown.
    hostile = "<b>x</b>\"'&"
    [bad] = await venturi.enqueue_many(conn, [export.job(Item(1), group=hostile)])
    r = await web.get("/kind", params={"name": "export", "group_q": "<b>"})
    assert "<b>x</b>" not in r.text and "&lt;b&gt;x&lt;/b&gt;" in r.text
    assert "<b>x</b>" not in (await web.get(f"/jobs/{bad}")).text
    await conn.execute("DELETE FROM venturi.jobs WHERE id = $1", bad)
    # A kind without groups shows no groups section.
    assert 'id="groups"' not in (await web.get("/kind", params={"name": "mail"})).text

    # Paging: 20 a page, then the rest.
    await venturi.enqueue_many(conn, [export.job(Item(1), group=f"g{i:02}") for i in range(20)])
    first = await web.get("/kind", params={"name": "export"})
    assert len(groups_shown(first.text)) == 20 and 'id="groups-next"' in first.text
    assert 'href="/kind?name=export&amp;group_order=pending&amp;group_page=2"' in first.text
    second = await web.get("/kind", params={"name": "export", "group_page": "2"})
    assert len(groups_shown(second.text)) == 4 and 'id="groups-prev"' in second.text
    assert not set(groups_shown(first.text)) & set(groups_shown(second.text))


async def test_the_json_twin_returns_the_same_rows(
    pool: asyncpg.Pool, conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    await seed(conn, export)
    r = await web.get("/api/groups", params={"kind": "export"})
    assert r.status_code == 200
    assert r.json() == json.loads(to_json(await admin.list_groups(conn, "export", limit=20)))
    assert [g["group"] for g in r.json()] == ["delta", "acme", "beta", "gamma"]
    assert r.json()[1]["waiting"] == "group at its cap"
    r = await web.get(
        "/api/groups", params={"kind": "export", "group_order": "claimed", "limit": "2"}
    )
    assert [g["group"] for g in r.json()] == ["acme", "beta"]
    r = await web.get(
        "/api/groups",
        params={"kind": "export", "group_order": "claimed", "limit": "2", "group_page": "2"},
    )
    assert [g["group"] for g in r.json()] == ["gamma", "delta"]
    r = await web.get("/api/groups", params={"kind": "export", "group_q": "mm"})
    assert [g["group"] for g in r.json()] == ["gamma"]
    for bad in (
        {},
        {"kind": "export", "group_order": "size"},
        {"kind": "export", "group_q": "x" * 201},
    ):
        r = await web.get("/api/groups", params=bad)
        assert r.status_code == 400 and len(r.json()["error"].splitlines()) == 1, bad
    async with client(venturi.web.app(pool, token=TOKEN)) as anon:
        assert (await anon.get("/api/groups", params={"kind": "export"})).status_code == 401


async def test_pause_and_resume_a_group(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    await seed(conn, export)
    journal = await journal_rows(conn)
    token = await csrf_of(web, "/kind?name=export")
    back = "/kind?name=export&group_q=acme"
    r = await web.post(
        "/kinds/groups/pause", data={"csrf": token, "back": back, "kind": "export", "group": "acme"}
    )
    assert r.status_code == 303 and r.headers["location"] == back
    page = (await web.get(back)).text
    assert "paused group acme of export" in page
    row = row_of(page, "acme")
    assert '<span class="badge paused">paused</span>' in row and "group paused" in row
    assert 'action="/kinds/groups/resume"' in row
    state = await admin.show_group(conn, "export", "acme")
    assert state is not None and state.paused
    # Its pending jobs say why they wait.
    [waiting] = [
        j for j in await admin.list_jobs(conn, kind="export", group="acme", status="pending")
    ][:1]
    r = await web.get(f"/jobs/{waiting.id}")
    assert 'id="group-waits"' in r.text and "group paused" in r.text
    assert 'action="/kinds/groups/resume"' in r.text

    r = await web.post(
        "/kinds/groups/resume",
        data={"csrf": token, "back": back, "kind": "export", "group": "acme"},
    )
    assert r.status_code == 303
    assert "resumed group acme of export" in (await web.get(back)).text
    state = await admin.show_group(conn, "export", "acme")
    assert state is not None and not state.paused
    assert await journal_rows(conn) == journal  # a group's setting is no job's event


async def test_a_long_group_name_is_paused_from_its_search_and_comes_back_there(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    # 200 four-byte characters, a kind of 200 too: the page's path percent-encoded is
    # about 4,800 characters long; past 2,000 the action sent the browser to the overview.
    name, kind = "\U0001f600" * 200, "\U0001f4e6" * 200
    await venturi.enqueue_many(conn, [JobSpec(kind, "{}", 1, None, None, None, 25, group=name)])
    back = "/kind?" + str(httpx.QueryParams({"name": kind, "group_q": name}))
    assert len(back) > 4000
    token = await csrf_of(web, back)
    r = await web.post(
        "/kinds/groups/pause", data={"csrf": token, "back": back, "kind": kind, "group": name}
    )
    assert r.status_code == 303 and r.headers["location"] == back
    state = await admin.show_group(conn, kind, name)
    assert state is not None and state.paused


async def test_bad_group_forms_are_refused_before_anything_is_written(
    pool: asyncpg.Pool, conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    await seed(conn, export)
    before = await conn.fetch("SELECT * FROM venturi.groups ORDER BY kind, grp")
    token = await csrf_of(web, "/kind?name=export")
    for bad in ("", "x" * 201, "ac\x01me", "ac\nme"):
        for path in ("/kinds/groups/pause", "/kinds/groups/resume"):
            r = await web.post(
                path, data={"csrf": token, "back": "/", "kind": "export", "group": bad}
            )
            assert r.status_code == 400, (path, bad)
            message = re.search(r"id=.error-message.>(.*?)</p>", r.text, re.S)
            text = message.group(1) if message else r.text
            assert "group must be a non-empty string of at most 200 characters" in text
            assert "\n" not in text.strip()  # one line
    r = await web.post("/kinds/groups/pause", data={"csrf": token, "back": "/", "group": "acme"})
    assert r.status_code == 400  # no kind
    # No CSRF token, or read-only: refused too.
    r = await web.post("/kinds/groups/pause", data={"back": "/", "kind": "export", "group": "acme"})
    assert r.status_code == 403
    async with client(venturi.web.app(pool, read_only=True)) as ro:
        page = await ro.get("/kind", params={"name": "export"})
        assert groups_shown(page.text) and "/kinds/groups/pause" not in page.text
        mine = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        r = await ro.post(
            "/kinds/groups/pause", data={"csrf": mine, "kind": "export", "group": "acme"}
        )
        assert r.status_code == 403
    assert await conn.fetch("SELECT * FROM venturi.groups ORDER BY kind, grp") == before
    for wrong in (
        {"group_q": "x" * 201},
        {"group_q": "a\x01"},
        {"group_order": "x"},
        {"group_page": "0"},
    ):
        r = await web.get("/kind", params={"name": "export", **wrong})
        assert r.status_code == 400, wrong


async def test_job_page_names_its_group_and_the_list_filters_by_it(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    await seed(conn, export)
    acme = await admin.list_jobs(conn, kind="export", group="acme", limit=10)
    pending = next(j for j in acme if j.status == "pending")
    r = await web.get(f"/jobs/{pending.id}")
    assert 'id="job-group"' in r.text and 'href="/jobs?kind=export&amp;group=acme"' in r.text
    assert 'id="group-waits"' in r.text and "group at its cap" in r.text
    # No worker runs export here: the kind holds it back too, said apart.
    assert re.search(r'id="kind-waits">.*no live worker runs its kind', r.text)
    claimed = next(j for j in acme if j.status == "claimed")
    r = await web.get(f"/jobs/{claimed.id}")
    assert 'id="job-group"' in r.text and 'id="group-waits"' not in r.text
    assert 'id="kind-waits"' not in r.text

    r = await web.get("/jobs", params={"group": "acme"})
    shown = [int(i) for i in re.findall(r'<tr data-id="(\d+)">', r.text)]
    assert sorted(shown) == sorted(j.id for j in acme) and "5 jobs match" in r.text
    assert 'id="group-filter" value="acme"' in r.text
    assert '<input type="hidden" name="group" value="acme">' in r.text  # the bulk form's
    r = await web.get("/jobs", params={"group": "acme", "status": "claimed"})
    assert len(re.findall(r'<tr data-id="(\d+)">', r.text)) == 2
    r = await web.get("/api/jobs", params={"group": "acme"})
    assert sorted(j["id"] for j in r.json()) == sorted(j.id for j in acme)
    assert {j["group"] for j in r.json()} == {"acme"}
    assert (await web.get("/api/jobs", params={"group": "a\x01"})).status_code == 400
    r = await web.get("/jobs", params={"group": "nobody"})
    assert "no job matches" in r.text
    # With a search: a kind's prefix (its arm of the search), or words of the carry (the
    # jobs not indexed yet, read row by row); the group filters every arm.
    r = await web.get("/jobs", params={"group": "acme", "q": "exp"})
    assert sorted(int(i) for i in re.findall(r'<tr data-id="(\d+)">', r.text)) == sorted(
        j.id for j in acme
    )
    r = await web.get("/jobs", params={"group": "beta", "q": "n 1"})
    [only] = [int(i) for i in re.findall(r'<tr data-id="(\d+)">', r.text)]
    assert (await venturi.get_job(conn, only)).group == "beta"  # type: ignore[union-attr]
    # Finished and indexed: the index's arm filters by group too.
    await conn.execute(
        "UPDATE venturi.jobs SET status = 'completed', finished_at = now() - interval '1 hour',"
        " claim_token = NULL WHERE status = 'claimed'"
    )
    assert (await admin.index_search(conn, margin=0.0)).jobs == 5
    r = await web.get("/jobs", params={"group": "acme", "q": "n", "status": "completed"})
    done = sorted(int(i) for i in re.findall(r'<tr data-id="(\d+)">', r.text))
    assert done == sorted(j.id for j in acme if j.status == "claimed") and len(done) == 2
    for bad in ({"group": "x" * 201}, {"group": "a\x01"}):
        r = await web.get("/jobs", params=bad)
        assert r.status_code == 400, bad
    assert (
        await web.get("/jobs/bulk", params={"action": "retry", "group": "a\x01"})
    ).status_code == 400

    # A bulk action on every job of a group: confirmed, then exactly those.
    r = await web.get(
        "/jobs/bulk", params={"action": "cancel", "group": "beta", "status": "pending"}
    )
    assert r.status_code == 200 and "<strong>1</strong> job(s) match now" in r.text
    assert 'group <strong class="group">beta</strong>' in r.text
    token = CSRF.search(r.text).group(1)  # type: ignore[union-attr]
    up_to = re.search(r'name="up_to" value="(\d+)"', r.text).group(1)  # type: ignore[union-attr]
    r = await web.post(
        "/jobs/bulk",
        data={
            "csrf": token,
            "back": "/jobs",
            "action": "cancel",
            "status": "pending",
            "group": "beta",
            "up_to": up_to,
        },
    )
    assert r.status_code == 303
    cancelled = await admin.list_jobs(conn, kind="export", status="cancelled")
    assert [j.group for j in cancelled] == ["beta"]


async def test_look_alike_groups_show_apart(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    # HTML shows "acme " and "acme\u200b" as "acme": three rows an operator could not
    # tell apart. A name that does not read as itself shows as its Python repr.
    names = {"acme": "acme", "acme ": "'acme '", "acme\u200b": "'acme\\u200b'"}
    ids = await venturi.enqueue_many(conn, [export.job(Item(1), group=g) for g in names])
    page = (await web.get("/kind", params={"name": "export"})).text
    for name, shown in names.items():
        cell = re.search(r'<td class="group"><a [^>]*>(.*?)</a>', row_of(page, html.escape(name)))
        assert cell and html.unescape(cell.group(1)) == shown, (name, shown)
    r = await web.post(
        "/kinds/groups/pause",
        data={"csrf": await csrf_of(web, "/"), "back": "/", "kind": "export", "group": "acme "},
    )
    assert r.status_code == 303
    assert "paused group &#39;acme &#39; of export" in (await web.get("/")).text
    state = await admin.show_group(conn, "export", "acme ")
    assert state is not None and state.paused
    for job_id, shown in zip(ids, names.values(), strict=True):
        text = (await web.get(f"/jobs/{job_id}")).text
        m = re.search(r'id="job-group"><a [^>]*>(.*?)</a>', text)
        assert m and html.unescape(m.group(1)) == shown, (shown, text)


async def test_a_page_past_the_last_says_so(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    # It said "no group matches", with no search to match.
    await seed(conn, export)
    r = await web.get("/kind", params={"name": "export", "group_page": "5"})
    assert r.status_code == 200 and "no group matches" not in r.text
    assert "page 5 is past the last page" in r.text
    assert 'href="/kind?name=export&amp;group_order=pending" id="groups-first"' in r.text


async def test_bad_group_parameters_are_refused_before_any_read() -> None:
    # The kind page read the database (the overview, the kind's activity: ~300 ms at a
    # million jobs) before it checked its group parameters, as /api/groups does not. On
    # a database nothing answers at, a bad parameter must still be its 400 (it was 503),
    # on a kind that does not exist too (no 404).
    app = venturi.web.app("postgresql://me:pw@127.0.0.1:1/db", token=TOKEN)
    async with client(app, headers={"Authorization": f"Bearer {TOKEN}"}) as anywhere:
        for wrong, needle in (
            ({"group_page": "0"}, "group_page must be between 1 and 10000, got 0"),
            ({"group_page": "-1"}, "group_page must be between 1 and 10000, got -1"),
            ({"group_page": "abc"}, "group_page must be an integer, got 'abc'"),
            ({"group_order": "bogus"}, "group_order must be one of pending, claimed"),
        ):
            r = await anywhere.get("/kind", params={"name": "no-such-kind", **wrong})
            assert r.status_code == 400, (wrong, r.status_code)
            message = re.search(r"id=.error-message.>(.*?)</p>", r.text, re.S)
            assert message and needle in html.unescape(message.group(1)), r.text
            assert "\n" not in message.group(1).strip()
        # A good query reads the database, and fails as it does without one.
        assert (await anywhere.get("/kind", params={"name": "x"})).status_code == 503


async def test_pausing_a_group_of_a_kind_nothing_has_warns(
    conn: asyncpg.Connection, web: httpx.AsyncClient, export: venturi.Task[Item]
) -> None:
    # As `venturi groups set` warns: set all the same (a group may be set up before its
    # kind is deployed), but a kind nothing has is most often misspelt. The dashboard
    # said "paused group acme of exprot" and nothing more.
    await seed(conn, export)
    token = await csrf_of(web, "/kind?name=export")
    warning = "warning: no job, schedule or running worker has kind &#39;exprot&#39; (yet)"
    for action, kind in (("pause", "exprot"), ("resume", "exprot"), ("pause", "export")):
        back = f"/kind?name={kind}"
        r = await web.post(
            f"/kinds/groups/{action}",
            data={"csrf": token, "back": back, "kind": kind, "group": "acme"},
        )
        assert r.status_code == 303
        page = (await web.get(back)).text
        assert f"group acme of {kind}" in page
        assert (warning in page) == (kind == "exprot"), (action, kind)
    state = await admin.show_group(conn, "exprot", "acme")
    assert state is not None and not state.paused
