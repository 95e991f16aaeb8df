"""The integration tests' shared fixtures: ``web``, the dashboard on the test's pool, in
process (``tests.support.web``); ``chromium`` and ``browser``, the browser tests' headless
Chromium (``tests.support.browser``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

import venturi.web
from tests.support.browser import browser, chromium  # noqa: F401 (fixtures)
from tests.support.web import client


@pytest.fixture
async def web(pool: asyncpg.Pool) -> AsyncIterator[httpx.AsyncClient]:
    async with client(venturi.web.app(pool)) as c:
        yield c
