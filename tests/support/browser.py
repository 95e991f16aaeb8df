"""Debian's headless Chromium, driven by selenium, and uvicorn serving the dashboard on a
free loopback port: what the browser tests share (one Chromium a module, handed to each
test as new)."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from tests.support.ports import free_port

# Found on PATH, as .ci/run looks for them (it installs them only when missing there).
CHROMIUM = shutil.which("chromium") or ""
CHROMEDRIVER = shutil.which("chromedriver") or ""

# The tests that need them skip without them.
needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs chromium and chromedriver on PATH (Debian's chromium and "
    "chromium-driver; .ci/run installs them)",
)


class _Server(uvicorn.Server):
    """uvicorn's server, setting ``over`` once its startup is over: listening
    (``started``), or given up (startup raised, ``sys.exit`` included)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.over = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.over.set()


class Served:
    """uvicorn in a thread of its own (its own event loop and the app's own pool)."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = _Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.server.run()
        finally:
            self.server.over.set()  # a thread that ends before its startup wakes __enter__

    def __enter__(self) -> str:
        self.thread.start()
        assert self.server.over.wait(20), "uvicorn did not start within 20s"
        assert self.server.started, "uvicorn stopped before it listened"
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)


# The window a test starts with (a screenshot test sets its own).
WINDOW = (1280, 1180)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for a module's tests: starting one took 0.6-0.9 s of the
    serial phase for each test (issue 39); ``browser`` hands it to each as new."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
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


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The module's Chromium as a new one would be: one tab, no cookie (every test's
    dashboard takes the same token, and a cookie of 127.0.0.1 goes to every port), no
    storage, no emulated colour scheme, the first window size, no console message left."""
    chromium.get_log("browser")
    yield chromium
    tabs = chromium.window_handles
    for tab in reversed(tabs):
        chromium.switch_to.window(tab)
        if chromium.current_url.startswith("http"):
            # The refresh and colour choices a test made, in its dashboard's origin.
            chromium.execute_script("localStorage.clear(); sessionStorage.clear()")
        if tab != tabs[0]:
            chromium.close()
    chromium.switch_to.window(tabs[0])
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    chromium.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    chromium.set_window_size(*WINDOW)
    chromium.get("about:blank")


def wait_until(driver: Any, condition: Any, within: float = 20.0) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The overview re-renders its table while it polls: an element found just before a
    # refresh is stale when read. Look again, as for one not there yet.
    return WebDriverWait(
        driver, within, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition)


# Keeps a page from polling while a test reads it.
PAUSE_REFRESH = "localStorage.setItem('venturi-refresh-paused', '1')"


def background(browser: Any) -> str:
    return str(browser.execute_script("return getComputedStyle(document.body).backgroundColor"))
