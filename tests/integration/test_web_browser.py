"""The dashboard in a real browser: Debian's headless Chromium driven by selenium, against
uvicorn serving the app on a free loopback port and a real database.

An operator logs in with the token, finds the dead job, reads its traceback, retries it,
and watches the overview (open in another tab, never reloaded) count it out. With
VENTURI_WEB_SCREENSHOTS=DIR the test also saves DIR/web-overview.png and DIR/web-job.png
(the README's pictures: ``VENTURI_WEB_SCREENSHOTS=docs pytest tests/test_web_browser.py``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import uvicorn

import venturi
import venturi.web
from tests.support.opsdata import S, make
from venturi import db, sql

# Found on PATH, as .ci/run looks for them (it installs them only when missing there).
CHROMIUM = shutil.which("chromium") or ""
CHROMEDRIVER = shutil.which("chromedriver") or ""
TOKEN = "browser-test-token-5f0c2a9e81b34d6f"

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs chromium and chromedriver on PATH (Debian's chromium and "
    "chromium-driver; .ci/run installs them)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """uvicorn in a thread of its own (its own event loop and the app's own pool)."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            assert self.thread.is_alive(), "uvicorn stopped"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1180",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(driver: Any, condition: Any, within: float = 20.0) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The overview re-renders its table while it polls: an element found just before a
    # refresh is stale when read. Look again, as for one not there yet.
    return WebDriverWait(
        driver, within, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition)


async def seed_for_pictures(conn: asyncpg.Connection) -> None:
    """A busier queue for the screenshots: an hour of traffic over eight kinds."""
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), 6000, 3600.0)
    await conn.execute(sql.statement("maintenance/journal_seed_bulk"))


async def test_operator_retries_a_dead_job_and_the_overview_follows(
    dsn: str, conn: asyncpg.Connection, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    shots = os.environ.get("VENTURI_WEB_SCREENSHOTS")
    if shots:
        await seed_for_pictures(conn)
    await make(conn, "fetch", "completed")
    dead = await make(conn, "fetch", "dead", carry='{"url": "https://example.com/feed.xml"}')
    await make(conn, "fetch", "pending")
    if shots:
        await db.kinds.kind_pause(
            conn,
            schema=S,
            kinds=["kind_7"],
            paused_by="operator:alice@ops",
            reason="vendor maintenance",
        )

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
            if shots:
                wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "rect.bar"))
                browser.save_screenshot(str(Path(shots) / "web-overview.png"))
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
            if shots:
                browser.save_screenshot(str(Path(shots) / "web-job.png"))
            browser.find_element(By.XPATH, "//button[text()='Retry']").click()
            summary = wait_until(browser, lambda d: d.find_element(By.ID, "outcome-summary"))
            assert summary.text == "1 done, 0 refused."

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
