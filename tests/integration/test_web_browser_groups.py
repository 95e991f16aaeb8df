"""The kind page's groups (SPEC 13) in a real browser (the headless Chromium of
tests/support/browser.py, as test_web_browser.py drives it): an operator opens a busy
kind, searches a group, pauses it with its button and sees it paused. With
VENTURI_WEB_SCREENSHOTS=DIR it saves the groups, light and dark, as
DIR/web-kind-groups.png and DIR/web-kind-groups-dark.png (docs/web.md's pictures:
``VENTURI_WEB_SCREENSHOTS=docs pytest tests/integration/test_web_browser_groups.py``)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import venturi
import venturi.web
from tests.support import Item
from tests.support.browser import (
    PAUSE_REFRESH,
    Served,
    background,
    needs_chromium,
    wait_until,
)
from venturi import Context, admin, db

pytestmark = [needs_chromium, pytest.mark.serial]

S = "venturi"
# A SaaS export queue: pending jobs per customer.
CUSTOMERS = {
    "acme": 120,
    "globex": 64,
    "initech": 40,
    "umbrella": 33,
    "hooli": 12,
    "stark-industries": 9,
    "wayne-enterprises": 6,
    "wonka": 3,
    "tyrell": 1,
}


async def busy_kind(conn: asyncpg.Connection) -> None:
    """The export kind (group_cap 2) with its customers' jobs, each claimed to its cap:
    acme weighs 3, globex has its own cap of 4, umbrella is paused."""

    @venturi.task(kind="export", group_cap=2)
    async def export(ctx: Context[Any], carry: Item) -> None:
        return None

    jobs = [export.job(Item(i), group=g) for g, n in CUSTOMERS.items() for i in range(n)]
    await venturi.enqueue_many(conn, jobs)
    await venturi.set_group(conn, "export", "acme", weight=3)
    await venturi.set_group(conn, "export", "globex", cap=4)
    while True:
        got, _ = await db.groups.claim_grouped(
            conn,
            schema=S,
            claimant=db.Claimant("export-worker-7f3c:4121"),
            kind="export",
            lease=600.0,
            floor=0,
            limit=50,
            limits=db.groups.GroupLimits(2, None, None),
        )
        if not got.claimed and not got.woken:
            break
    # Paused while two of its jobs run: they finish, the rest stay pending.
    await venturi.set_group(conn, "export", "umbrella", paused=True)


async def test_search_a_group_and_pause_it_from_the_kind_page(
    dsn: str,
    conn: asyncpg.Connection,
    browser: Any,
    tmp_path: Path,
    kinds: list[str],
) -> None:
    from selenium.webdriver.common.by import By

    await busy_kind(conn)
    shots = Path(os.environ.get("VENTURI_WEB_SCREENSHOTS") or tmp_path)
    with Served(venturi.web.app(dsn)) as base:

        def shown() -> list[str]:
            rows = browser.find_elements(By.CSS_SELECTOR, "#groups-table tr[data-group]")
            return [str(r.get_attribute("data-group")) for r in rows]

        def pictures() -> None:
            browser.set_window_size(1100, 760)
            for scheme in ("light", "dark"):
                browser.execute_cdp_cmd(
                    "Emulation.setEmulatedMedia",
                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
                )
                browser.get(base + "/kind?name=export")
                browser.execute_script(PAUSE_REFRESH)
                wait_until(browser, lambda d: d.find_elements(By.ID, "groups-table"))
                browser.execute_script("document.getElementById('groups').scrollIntoView()")
                suffix = "" if scheme == "light" else "-dark"
                browser.save_screenshot(str(shots / f"web-kind-groups{suffix}.png"))
                assert background(browser) == (
                    "rgb(17, 19, 22)" if suffix else "rgb(247, 247, 245)"
                )
            browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

        def drive() -> None:
            browser.get(base + "/kind?name=export")
            browser.execute_script(PAUSE_REFRESH)
            assert shown() == list(CUSTOMERS)  # most pending first
            browser.find_element(By.CSS_SELECTOR, '#groups a[data-order="claimed"]').click()
            wait_until(browser, lambda d: "group_order=claimed" in d.current_url)
            assert shown()[0] == "globex"  # its own cap of 4: the most claimed
            box = browser.find_element(By.ID, "group-search")
            box.send_keys("hoo")
            browser.find_element(By.CSS_SELECTOR, "#group-filters button").click()
            wait_until(browser, lambda d: "group_q=hoo" in d.current_url)
            assert shown() == ["hooli"]
            row = browser.find_element(By.CSS_SELECTOR, 'tr[data-group="hooli"]')
            assert "active" in row.find_element(By.CSS_SELECTOR, "td.state").text
            searched = browser.current_url
            row.find_element(By.CSS_SELECTOR, "button").click()
            summary = wait_until(browser, lambda d: d.find_element(By.ID, "flash-summary"))
            assert summary.text == "1 done, 0 refused."
            assert browser.current_url == searched  # back to the search
            row = browser.find_element(By.CSS_SELECTOR, 'tr[data-group="hooli"]')
            assert row.find_element(By.CSS_SELECTOR, "td.state").text == "paused"
            assert row.find_element(By.CSS_SELECTOR, "td.waits").text == "group paused"
            assert row.find_element(By.CSS_SELECTOR, "button").text == "Resume"
            pictures()

        await asyncio.get_running_loop().run_in_executor(None, drive)
    hooli = await admin.show_group(conn, "export", "hooli")
    assert hooli is not None and hooli.paused and hooli.pending == 10
    assert (shots / "web-kind-groups-dark.png").stat().st_size > 0
