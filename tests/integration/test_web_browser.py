"""The dashboard in a real browser: Debian's headless Chromium driven by selenium, against
uvicorn serving the app on a free loopback port and a real database.

An operator logs in with the token, finds the dead job, reads its traceback, retries it,
and watches the overview (open in another tab, never reloaded) count it out; the
operator's second generation (search, selection, recovery, dark mode, refresh, the
workflow graph). With VENTURI_WEB_SCREENSHOTS=DIR the screenshot test saves every page,
light and dark, as DIR/web-<page>.png and DIR/web-<page>-dark.png (docs/web.md's
pictures: ``VENTURI_WEB_SCREENSHOTS=docs pytest tests/integration/test_web_browser.py -k
screenshots``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import venturi
import venturi.web
from tests.support.browser import (
    PAUSE_REFRESH,
    Served,
    background,
    needs_chromium,
    wait_until,
)
from tests.support.opsdata import S, make
from venturi import db, sql

TOKEN = "browser-test-token-5f0c2a9e81b34d6f"

# Serial (tests/support/alone.py): a headless Chromium takes a core or two of its own, and
# each step waits at most 20 s for the page to follow.
pytestmark = [needs_chromium, pytest.mark.serial]


async def seed_for_pictures(conn: asyncpg.Connection) -> None:
    """A busier queue for the screenshots: an hour of traffic over eight kinds."""
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), 6000, 3600.0)
    await conn.execute(sql.statement("maintenance/journal_seed_bulk"))


async def test_operator_retries_a_dead_job_and_the_overview_follows(
    dsn: str, conn: asyncpg.Connection, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    await make(conn, "fetch", "completed")
    dead = await make(conn, "fetch", "dead", carry='{"url": "https://example.com/feed.xml"}')
    await make(conn, "fetch", "pending")

    app = venturi.web.app(dsn, token=TOKEN)
    loop = asyncio.get_running_loop()
    with Served(app) as base:

        def dead_count() -> str:
            cell = browser.find_element(By.CSS_SELECTOR, 'tr[data-kind="fetch"] a.dead-count')
            return str(cell.text)

        def drive() -> str:
            # Every page needs the token: the browser lands on the login form.
            browser.get(base + "/")
            wait_until(browser, lambda d: "/login" in d.current_url)
            browser.find_element(By.ID, "token").send_keys(TOKEN)
            browser.find_element(By.CSS_SELECTOR, "form.login button").click()
            wait_until(browser, lambda d: d.current_url == base + "/")
            assert dead_count() == "1"
            overview_tab = browser.current_window_handle

            # The list of dead jobs, then the job, in a second tab.
            browser.switch_to.new_window("tab")
            browser.get(base + "/jobs?status=dead&kind=fetch")
            browser.find_element(By.CSS_SELECTOR, f'a[href="/jobs/{dead}"]').click()
            wait_until(browser, lambda d: d.current_url == f"{base}/jobs/{dead}")
            traceback = browser.find_element(By.CSS_SELECTOR, "pre.traceback").text
            assert "Traceback (most recent call last)" in traceback
            assert "ConnectionError: upstream refused" in traceback
            assert "https://example.com/feed.xml" in browser.find_element(By.ID, "carry").text
            browser.find_element(By.XPATH, "//button[text()='Retry']").click()
            summary = wait_until(browser, lambda d: d.find_element(By.ID, "flash-summary"))
            assert summary.text == "1 done, 0 refused."
            assert browser.current_url == f"{base}/jobs/{dead}"  # back where it was, by GET

            # Back on the overview, never reloaded: its poll brings the new count.
            browser.switch_to.window(overview_tab)
            browser.execute_script("window.venturiNotReloaded = true")
            wait_until(browser, lambda d: dead_count() == "0")
            assert browser.execute_script("return window.venturiNotReloaded") is True
            # The CSP never had to refuse anything (no inline script or style anywhere).
            logs = [e["message"] for e in browser.get_log("browser")]
            assert not [m for m in logs if "Content Security Policy" in m], logs
            return str(browser.page_source)

        await loop.run_in_executor(None, drive)
    job = await venturi.get_job(conn, dead)
    assert job is not None and job.status == "pending" and job.failures == 0
    entry = (await venturi.get_journal(conn, dead))[-1]
    assert (entry.event, entry.worker) == ("retried", "web:127.0.0.1")


# --- the operator's second generation: search, selection, recovery, graph, theme, refresh


@pytest.fixture
def served(dsn: str) -> Iterator[str]:
    with Served(venturi.web.app(dsn)) as base:
        yield base


def rows_shown(browser: Any) -> list[int]:
    from selenium.webdriver.common.by import By

    return [
        int(r.get_attribute("data-id"))
        for r in browser.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-id]")
    ]


async def test_search_then_act_on_the_selected_rows(
    conn: asyncpg.Connection, served: str, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    a = await make(conn, "fetch", "dead", carry='{"shop": "walnut"}')
    b = await make(conn, "fetch", "dead", carry='{"shop": "walnut"}')
    c = await make(conn, "fetch", "dead", carry='{"shop": "cedar"}')
    await make(conn, "mail", "completed", carry='{"shop": "walnut"}')

    def drive() -> str:
        browser.get(served + "/jobs")
        # No refresh under the clicks (a refreshed row would be a stale element).
        browser.execute_script(PAUSE_REFRESH)
        box = browser.find_element(By.ID, "search")
        box.send_keys("walnut")
        Select(browser.find_element(By.ID, "status")).select_by_value("dead")
        browser.find_element(By.CSS_SELECTOR, "#filters button").click()
        wait_until(browser, lambda d: "q=walnut" in d.current_url)
        assert sorted(rows_shown(browser)) == [a, b]
        assert "2 jobs match" in browser.find_element(By.ID, "totals").text
        # The kind picker lists the known kinds.
        picker = Select(browser.find_element(By.ID, "kind-picker"))
        assert [o.text for o in picker.options] == ["any", "fetch", "mail"]
        retry = browser.find_element(By.CSS_SELECTOR, ".selection button[value=retry]")
        assert not retry.is_enabled()  # nothing ticked yet
        browser.find_element(By.ID, "select-all").click()
        assert browser.find_element(By.ID, "selected-count").text == "2"
        browser.find_element(By.CSS_SELECTOR, f'input[name=ids][value="{a}"]').click()
        assert browser.find_element(By.ID, "selected-count").text == "1"
        listed = browser.current_url
        retry.click()
        summary = wait_until(browser, lambda d: d.find_element(By.ID, "flash-summary"))
        assert summary.text == "1 done, 0 refused."
        assert browser.current_url == listed  # redirected back: no page at a POST URL
        return str(browser.current_url)

    await asyncio.get_running_loop().run_in_executor(None, drive)
    statuses = [(await venturi.get_job(conn, i)).status for i in (a, b, c)]  # type: ignore[union-attr]
    assert statuses == ["dead", "pending", "dead"]
    assert (await venturi.get_journal(conn, b))[-1].worker == "web:127.0.0.1"


async def test_recover_a_gone_workers_claims_from_the_workers_page(
    conn: asyncpg.Connection, served: str, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    from tests.support.fleet import gone_worker

    await gone_worker(conn, "crashed-host:9", {"fetch": 2})

    def drive() -> None:
        browser.get(served + "/")
        warning = wait_until(browser, lambda d: d.find_element(By.ID, "gone-warning"))
        assert "crashed-host:9" in warning.text and "fetch 2" in warning.text
        browser.get(served + "/workers")
        browser.execute_script(PAUSE_REFRESH)
        browser.find_element(By.XPATH, "//button[text()='Recover claims']").click()
        summary = wait_until(browser, lambda d: d.find_element(By.ID, "flash-summary"))
        assert summary.text == "2 done, 0 refused."
        assert browser.current_url == served + "/workers"

    await asyncio.get_running_loop().run_in_executor(None, drive)
    jobs = await venturi.admin.list_jobs(conn, kind="fetch")
    assert [j.status for j in jobs] == ["pending", "pending"]


async def test_dark_mode_follows_the_system_and_the_toggle_keeps_its_choice(
    served: str, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    light, dark = "rgb(247, 247, 245)", "rgb(17, 19, 22)"

    def drive() -> None:
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        browser.get(served + "/jobs")
        assert background(browser) == dark  # the system's setting
        toggle = browser.find_element(By.ID, "theme-toggle")
        assert toggle.text == "theme: system"
        toggle.click()
        assert toggle.text == "theme: dark" and background(browser) == dark
        toggle.click()
        assert toggle.text == "theme: light"
        wait_until(browser, lambda d: background(d) == light)  # light despite the system
        browser.get(served + "/workers")  # kept: the server renders the choice
        assert background(browser) == light
        assert browser.find_element(By.ID, "theme-toggle").text == "theme: light"
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "light"}]},
        )
        browser.find_element(By.ID, "theme-toggle").click()  # -> system
        browser.find_element(By.ID, "theme-toggle").click()  # -> dark
        wait_until(browser, lambda d: background(d) == dark)  # dark despite the system
        logs = [e["message"] for e in browser.get_log("browser")]
        assert not [m for m in logs if "Content Security Policy" in m], logs

    await asyncio.get_running_loop().run_in_executor(None, drive)


async def test_refresh_control_sets_the_interval_and_pauses(
    conn: asyncpg.Connection, served: str, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    first = await make(conn, "fetch", "pending")
    loop = asyncio.get_running_loop()

    def open_list() -> None:
        browser.get(served + "/jobs")
        Select(browser.find_element(By.ID, "refresh-interval")).select_by_value("2")
        assert rows_shown(browser) == [first]
        browser.execute_script("window.venturiNotReloaded = true")

    await loop.run_in_executor(None, open_list)
    second = await make(conn, "fetch", "pending")
    await loop.run_in_executor(
        None, lambda: wait_until(browser, lambda d: rows_shown(d) == [second, first])
    )

    def pause() -> None:
        assert browser.execute_script("return window.venturiNotReloaded") is True
        browser.find_element(By.ID, "refresh-pause").click()
        assert browser.find_element(By.ID, "refresh-pause").text == "resume"

    await loop.run_in_executor(None, pause)
    third = await make(conn, "fetch", "pending")

    def resume() -> None:
        # Paused: two more ticks of the timer pass and the list stays as it was.
        ticks = browser.execute_script("return window.venturiTicks")
        wait_until(browser, lambda d: d.execute_script("return window.venturiTicks") >= ticks + 2)
        assert rows_shown(browser) == [second, first]
        browser.find_element(By.ID, "refresh-pause").click()
        wait_until(browser, lambda d: rows_shown(d) == [third, second, first])
        assert browser.execute_script("return window.venturiNotReloaded") is True
        # The choice is kept for the next page.
        browser.get(served + "/workers")
        assert (
            Select(browser.find_element(By.ID, "refresh-interval")).first_selected_option.text
            == "2 s"
        )

    await loop.run_in_executor(None, resume)


async def test_workflow_graph_nodes_link_and_take_their_status_colour(
    tmp_path: Path, served: str, browser: Any
) -> None:
    import jinja2
    from selenium.webdriver.common.by import By

    from venturi.web import filters
    from venturi.web.graph import DrawnJob, layout

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("venturi.web", "templates"), autoescape=True
    )
    filters.install(env)
    g = layout(
        [
            DrawnJob(1, "order.place", "completed", served + "/jobs/1"),
            DrawnJob(2, "payment.charge", "dead", served + "/jobs/2"),
            DrawnJob(3, "stock.reserve", "waiting", served + "/jobs/3"),
        ],
        [(1, 2), (1, 3)],
        current=1,
    )
    svg = env.from_string('{% import "_macros.html" as m %}{{ m.graph(g) }}').render(g=g)
    page = tmp_path / "graph.html"
    page.write_text(
        f'<!doctype html><link rel="stylesheet" href="{served}/static/venturi.css">{svg}'
    )

    def drive() -> None:
        browser.get(page.as_uri())

        def stroke(job: int) -> str:
            rect = browser.find_element(By.CSS_SELECTOR, f'a[data-job="{job}"] rect')
            return str(rect.value_of_css_property("stroke"))

        wait_until(browser, lambda d: stroke(2) == "rgb(192, 57, 43)")  # dead: --bad
        assert stroke(1) == "rgb(31, 138, 76)"  # completed: --ok
        assert stroke(3) == "rgb(43, 123, 185)"  # waiting: --pend
        box = browser.find_element(By.CSS_SELECTOR, 'a[data-job="1"] rect').rect
        below = browser.find_element(By.CSS_SELECTOR, 'a[data-job="2"] rect').rect
        assert below["y"] > box["y"] + box["height"]
        browser.find_element(By.CSS_SELECTOR, 'a[data-job="2"] text').click()
        wait_until(browser, lambda d: d.current_url == served + "/jobs/2")

    await asyncio.get_running_loop().run_in_executor(None, drive)


async def test_a_real_workflow_in_the_list_and_its_graph_in_light_and_dark(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], served: str, browser: Any
) -> None:
    """Workflows run by a real worker: the list shows the order saga with its progress;
    its page draws it, coloured by status in both themes; a click on a node opens that
    job's page, which marks it as the current job."""
    from selenium.webdriver.common.by import By

    from tests.support.flows import run_flows

    flows = await run_flows(dsn, conn)
    light = {"completed": "rgb(31, 138, 76)", "waiting": "rgb(43, 123, 185)"}
    dark = {"completed": "rgb(76, 195, 138)", "waiting": "rgb(95, 168, 232)"}

    def stroke(job: int) -> str:
        rect = browser.find_element(By.CSS_SELECTOR, f'#workflow-graph a[data-job="{job}"] rect')
        return str(rect.value_of_css_property("stroke"))

    def drive() -> None:
        browser.get(served + "/workflows")
        browser.execute_script(PAUSE_REFRESH)
        row = browser.find_element(
            By.CSS_SELECTOR, f'#workflows-table tr[data-id="{flows.gatherer}"]'
        )
        assert "1 completed, 1 open" in row.find_element(By.CSS_SELECTOR, "td.children").text
        row.find_element(By.CSS_SELECTOR, f'a[href="/jobs/{flows.gatherer}"]').click()
        wait_until(browser, lambda d: d.current_url == f"{served}/jobs/{flows.gatherer}")
        assert "1 of 2 children, still to finish" in browser.find_element(By.ID, "waiting-for").text
        done, waiting = flows.gathered
        for scheme, colours in (("light", light), ("dark", dark)):
            browser.execute_cdp_cmd(
                "Emulation.setEmulatedMedia",
                {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
            )
            wait_until(browser, lambda d, c=colours: stroke(done) == c["completed"])
            assert stroke(waiting) == colours["waiting"]
        current = browser.find_element(By.CSS_SELECTOR, "#workflow-graph a.current")
        assert current.get_attribute("data-job") == str(flows.gatherer)
        # A click on the waiting child's box opens its page, where it is the current job.
        browser.find_element(
            By.CSS_SELECTOR, f'#workflow-graph a[data-job="{waiting}"] text'
        ).click()
        wait_until(browser, lambda d: d.current_url == f"{served}/jobs/{waiting}")
        current = browser.find_element(By.CSS_SELECTOR, "#workflow-graph a.current")
        assert current.get_attribute("data-job") == str(waiting)
        assert "the signal courier" in browser.find_element(By.ID, "waiting-for").text
        logs = [e["message"] for e in browser.get_log("browser")]
        assert not [m for m in logs if "Content Security Policy" in m], logs

    await asyncio.get_running_loop().run_in_executor(None, drive)


# Each drawn edge's points (getPointAtLength, every 2 px) that fall inside a box other
# than the edge's two ends: the boxes as the browser lays them out.
EDGES_THROUGH_BOXES = """
const boxes = [...document.querySelectorAll('#workflow-graph a.node')].map(a => {
  const r = a.querySelector('rect');
  return {id: a.dataset.job, x: r.x.baseVal.value, y: r.y.baseVal.value,
          w: r.width.baseVal.value, h: r.height.baseVal.value};
});
const hits = [];
for (const edge of document.querySelectorAll('#workflow-graph path.edge')) {
  const len = edge.getTotalLength();
  const start = edge.getPointAtLength(0), end = edge.getPointAtLength(len);
  const owns = b => (Math.abs(start.y - (b.y + b.h)) < 1 && start.x > b.x && start.x < b.x + b.w)
                 || (Math.abs(end.y - b.y) < 1 && end.x > b.x && end.x < b.x + b.w);
  for (let t = 0; t <= len; t += 2) {
    const p = edge.getPointAtLength(t);
    for (const b of boxes) {
      if (!owns(b) && p.x > b.x + 1 && p.x < b.x + b.w - 1 && p.y > b.y + 1 && p.y < b.y + b.h - 1) {
        hits.push([b.id, Math.round(p.x), Math.round(p.y)]);
      }
    }
  }
}
return [boxes.length, document.querySelectorAll('#workflow-graph path.edge').length, hits];
"""


async def test_the_etl_graph_draws_no_edge_through_a_box_and_a_signal_is_sent(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], served: str, browser: Any
) -> None:
    """Issue 40: extract -> transform -> load with load after both, drawn by the browser:
    no edge passes through a box. Then an operator opens Send signal on a job waiting for
    one, reads what it does, and sends it with a JSON payload."""
    from selenium.webdriver.common.by import By

    from tests.support.flows import run_flows

    flows = await run_flows(dsn, conn)

    def drive() -> None:
        browser.get(f"{served}/jobs/{flows.transform}")
        browser.execute_script(PAUSE_REFRESH)
        boxes, edges, hits = browser.execute_script(EDGES_THROUGH_BOXES)
        assert (boxes, edges, hits) == (3, 3, [])
        browser.get(f"{served}/jobs/{flows.approver}")
        browser.execute_script(PAUSE_REFRESH)
        assert not browser.find_elements(By.ID, "run-now")
        form = browser.find_element(By.CSS_SELECTOR, "#send-signal form")
        assert not form.is_displayed()  # closed until asked
        browser.find_element(By.CSS_SELECTOR, "#send-signal summary").click()
        assert "the job runs on with this payload" in form.text
        form.find_element(By.NAME, "payload").send_keys('"maria"')
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        summary = wait_until(browser, lambda d: d.find_element(By.ID, "flash-summary"))
        assert summary.text == "1 done, 0 refused."

    await asyncio.get_running_loop().run_in_executor(None, drive)
    job = await venturi.get_job(conn, flows.approver)
    assert job is not None and job.status == "pending"
    assert (await venturi.get_journal(conn, flows.approver))[-1].worker == "web:127.0.0.1"


PAGES = (
    ("overview", "/"),
    ("jobs", "/jobs?q=upstream&status=dead"),
    ("job", "/jobs/{dead}"),
    ("workflows", "/workflows"),
    ("workflow", "/jobs/{workflow}"),
    ("kinds", "/kinds"),
    ("kind", "/kind?name=kind_3"),
    ("workers", "/workers"),
    ("schedules", "/schedules"),
)


async def test_screenshots_of_every_page_light_and_dark(
    dsn: str, conn: asyncpg.Connection, browser: Any, tmp_path: Path, kinds: list[str]
) -> None:
    """Every page, light and dark, from a seeded database, without a CSP refusal; with
    VENTURI_WEB_SCREENSHOTS=DIR the pictures (DIR/web-<page>.png, web-<page>-dark.png)
    are those of docs/web.md, else they go to a temporary directory."""
    from selenium.webdriver.common.by import By

    from tests.support.fleet import gone_worker
    from tests.support.flows import run_flows

    shots = Path(os.environ.get("VENTURI_WEB_SCREENSHOTS") or tmp_path)
    await seed_for_pictures(conn)
    await conn.execute(sql.statement("maintenance/workflows_seed_bulk"), 12, 3)
    flows = await run_flows(dsn, conn)
    await gone_worker(conn, "web-7f3c:4121", {"kind_1": 2, "kind_4": 1})
    dead = await make(conn, "fetch", "dead", carry='{"url": "https://example.com/feed.xml"}')
    await db.kinds.kind_pause(
        conn, schema=S, kinds=["kind_7"], paused_by="operator:alice@ops", reason="vendor down"
    )
    app = venturi.web.app(dsn, token=TOKEN)
    with Served(app) as base:

        def drive() -> None:
            browser.set_window_size(1100, 760)
            for scheme in ("light", "dark"):
                browser.execute_cdp_cmd(
                    "Emulation.setEmulatedMedia",
                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
                )
                suffix = "" if scheme == "light" else "-dark"
                browser.delete_all_cookies()
                browser.get(base + "/login")
                browser.save_screenshot(str(shots / f"web-login{suffix}.png"))
                browser.find_element(By.ID, "token").send_keys(TOKEN)
                browser.find_element(By.CSS_SELECTOR, "form.login button").click()
                wait_until(browser, lambda d: d.current_url == base + "/")
                for name, path in PAGES:
                    browser.get(base + path.format(dead=dead, workflow=flows.gatherer))
                    if name in ("overview", "kind"):
                        wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "rect.bar"))
                    browser.save_screenshot(str(shots / f"web-{name}{suffix}.png"))
                    assert background(browser) == (
                        "rgb(17, 19, 22)" if suffix else "rgb(247, 247, 245)"
                    )
            logs = [e["message"] for e in browser.get_log("browser")]
            assert not [m for m in logs if "Content Security Policy" in m], logs

        await asyncio.get_running_loop().run_in_executor(None, drive)
    assert (shots / "web-overview-dark.png").stat().st_size > 0
