"""Whole databases: create, clone from a template, drop (for test databases)."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn


async def database_create(conn: Conn, *, name: str) -> None:
    await conn.execute(sql.database_statement("database_create", name))


async def database_clone(conn: Conn, *, name: str, template: str) -> None:
    await conn.execute(sql.database_statement("database_clone", name, template=template))


async def database_drop(conn: Conn, *, name: str) -> None:
    await conn.execute(sql.database_statement("database_drop", name))
