"""One fresh database per test, cloned from a template that has the schema applied (a
few tens of milliseconds per test)."""

from __future__ import annotations

import asyncio
import urllib.parse
import uuid

import asyncpg

from venturi import db
from venturi.sql import DEFAULT_SCHEMA
from venturi.testing.server import with_database


class DatabaseFactory:
    """Makes one database per test, cloned from a template with the schema applied."""

    def __init__(self, admin_dsn: str, schema: str = DEFAULT_SCHEMA) -> None:
        self.admin_dsn = db.connect.plain_dsn(admin_dsn)
        self.schema = schema
        self.template = f"venturi_tpl_{uuid.uuid4().hex[:12]}"

    async def _admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.admin_dsn)

    async def setup(self) -> None:
        conn = await self._admin()
        try:
            await db.databases.database_create(conn, name=self.template)
        finally:
            await conn.close()
        conn = await asyncpg.connect(with_database(self.admin_dsn, self.template))
        try:
            await db.schema.apply_schema(conn, schema=self.schema)
        finally:
            await conn.close()

    async def create_empty(self) -> str:
        """A new database with nothing in it."""
        name = f"venturi_e_{uuid.uuid4().hex[:12]}"
        conn = await self._admin()
        try:
            await db.databases.database_create(conn, name=name)
        finally:
            await conn.close()
        return with_database(self.admin_dsn, name)

    async def create(self) -> str:
        """A new database cloned from the migrated template."""
        name = f"venturi_t_{uuid.uuid4().hex[:12]}"
        conn = await self._admin()
        try:
            # Cloning can fail while another session briefly touches the template.
            for attempt in range(20):
                try:
                    await db.databases.database_clone(conn, name=name, template=self.template)
                    break
                except asyncpg.ObjectInUseError:
                    if attempt == 19:
                        raise
                    await asyncio.sleep(0.05)
        finally:
            await conn.close()
        return with_database(self.admin_dsn, name)

    async def drop(self, dsn: str) -> None:
        name = urllib.parse.urlsplit(dsn).path.lstrip("/")
        conn = await self._admin()
        try:
            await db.databases.database_drop(conn, name=name)
        finally:
            await conn.close()

    async def teardown(self) -> None:
        await self.drop(with_database(self.admin_dsn, self.template))
