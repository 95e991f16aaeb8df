"""`venturi metrics` run by a test: the exporter as a subprocess, and its page scraped
once it holds a wanted line (it reads the queue every interval)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request

from tests.support.cli import ROOT
from tests.support.waits import wait_for


def spawn_exporter(dsn: str, port: int, interval: float = 0.2) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "venturi",
            "metrics",
            "--port",
            str(port),
            "--interval",
            str(interval),
        ],
        cwd=ROOT,
        env={**os.environ, "VENTURI_DSN": dsn},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def scrape(port: int) -> list[str]:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode()).splitlines()


async def scrape_when(port: int, wanted: str, within: float = 60) -> list[str]:
    """The exporter's page once it holds the line ``wanted``."""
    found: list[str] = []

    async def holds() -> bool:
        nonlocal found
        try:
            found = await asyncio.to_thread(scrape, port)
        except OSError:  # URLError, a reset, a timeout: not listening yet, or too busy
            return False
        return wanted in found

    await wait_for(holds, within, every=0.1)
    return found
