"""How a test runs this project (in the parent test process): a scenario of
``scenarios`` or ``manage.py`` in a subprocess on the test's database, with the
environment ``settings`` reads."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

from tests.support.cli import ROOT

# The drivers Django's connection is tested on.
DRIVERS = ["psycopg", "psycopg2"]
MANAGE = ROOT / "tests" / "support" / "django_app" / "manage.py"


def environment(dsn: str, driver: str = "psycopg", **extra: str) -> dict[str, str]:
    """What a subprocess of the project runs with: this test's database and driver."""
    return {
        **os.environ,
        "VENTURI_DJANGO_DSN": dsn,
        "VENTURI_DJANGO_DRIVER": driver,
        "DJANGO_SETTINGS_MODULE": "tests.support.django_app.settings",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


async def scenario(name: str, dsn: str, driver: str = "psycopg", **extra: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.django_app.scenarios",
        name,
        cwd=ROOT,
        env=environment(dsn, driver, **extra),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, f"{name}:\n{out.decode()}\n{err.decode()}"
    found: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return found


async def manage(
    dsn: str, *args: str, driver: str = "psycopg", **extra: str
) -> subprocess.CompletedProcess[str]:
    def go() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(MANAGE), *args],
            cwd=ROOT,
            env=environment(dsn, driver, **extra),
            capture_output=True,
            text=True,
            timeout=180,
        )

    return await asyncio.to_thread(go)
