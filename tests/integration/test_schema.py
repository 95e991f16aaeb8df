"""Applying the schema: idempotent, versioned, and equal to the migrations' result."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

import venturi
from tests.support import sql as tsql
from tests.support.carries import Item, noop_task
from tests.support.claims import claim
from tests.support.schemas import migrated_to
from tests.support.waits import wait_blocked
from venturi import SchemaError, db, sql

W = db.Claimant("w:1")


async def _catalog(conn: asyncpg.Connection, schema: str) -> list[tuple[str, ...]]:
    # Read-only catalog introspection for the comparison; not part of the library.
    rows = await conn.fetch(
        """
        SELECT 'column', table_name, column_name, data_type, coalesce(column_default, ''),
               is_nullable
        FROM information_schema.columns WHERE table_schema = $1
        UNION ALL
        SELECT 'index', tablename, indexname, indexdef, '', '' FROM pg_indexes WHERE schemaname = $1
        UNION ALL
        SELECT 'trigger', event_object_table, trigger_name, event_manipulation, action_timing, ''
        FROM information_schema.triggers WHERE trigger_schema = $1
        UNION ALL
        SELECT 'function', p.proname, pg_get_function_arguments(p.oid),
               pg_get_function_result(p.oid), p.prosrc, ''
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
        UNION ALL
        SELECT 'storage', c.relname, coalesce(array_to_string(c.reloptions, ','), ''), '', '', ''
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = $1 AND c.relkind = 'r'
        ORDER BY 1, 2, 3, 4
        """,
        schema,
    )
    # Index definitions name their schema; compare shapes, not names.
    return [
        tuple(
            str(v)
            .replace(f'"{schema}"', "<schema>")
            .replace(f"{schema}.", "<schema>.")
            .replace(f"'{schema}_", "'<schema>_")
            for v in r
        )
        for r in rows
    ]


async def test_apply_twice_changes_nothing(empty_dsn: str) -> None:
    conn = await asyncpg.connect(empty_dsn)
    try:
        assert await db.schema.apply_schema(conn, schema="venturi") == [
            m.version for m in sql.migrations()
        ]
        before = await _catalog(conn, "venturi")
        assert await db.schema.apply_schema(conn, schema="venturi") == []
        assert await _catalog(conn, "venturi") == before
        assert (
            await db.schema.schema_version(conn, schema="venturi") == sql.migrations()[-1].version
        )
    finally:
        await conn.close()


async def test_concurrent_applies_serialize(empty_dsn: str) -> None:
    conns = [await asyncpg.connect(empty_dsn) for _ in range(3)]
    try:
        results = await asyncio.gather(
            *(db.schema.apply_schema(c, schema="venturi") for c in conns)
        )
        assert sorted(results) == [[], [], [m.version for m in sql.migrations()]]
    finally:
        for c in conns:
            await c.close()


async def test_fresh_schema_equals_migrations(empty_dsn: str) -> None:
    conn = await asyncpg.connect(empty_dsn)
    try:
        await conn.execute(sql.fresh_schema("fresh"))
        for migration in sql.migrations("migrated"):
            await conn.execute(migration.sql)
        assert await _catalog(conn, "fresh") == await _catalog(conn, "migrated")
        assert await db.schema.schema_version(conn, schema="fresh") == sql.migrations()[-1].version
    finally:
        await conn.close()


async def test_a_database_an_earlier_render_left_short_is_made_whole(empty_dsn: str) -> None:
    # Migrations 19, 20 and 25 were changed after some databases had applied them: those
    # databases lacked groups.token_at (every grouped claim failed on it, the schema "up
    # to date"), groups_set_idx, the partial groups_vtime_idx and the queue tables'
    # vacuum settings. Seeded here as they were left; migration 26 makes them again.
    conn = await asyncpg.connect(empty_dsn)
    try:
        await conn.execute(sql.fresh_schema("fresh"))
        for migration in sql.migrations("migrated"):
            if migration.version < 26:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO migrated.schema_version (version, name) VALUES ($1, $2) "
                    "ON CONFLICT DO NOTHING",
                    migration.version,
                    migration.name,
                )
        # Test-side writes: the state an earlier render of migrations 19, 20, 25 left.
        await conn.execute(
            "ALTER TABLE migrated.groups DROP COLUMN token_at;"
            "DROP INDEX migrated.groups_set_idx; DROP INDEX migrated.groups_vtime_idx;"
            "CREATE INDEX groups_vtime_idx ON migrated.groups (kind, vtime);"
            "ALTER TABLE migrated.groups RESET (autovacuum_vacuum_scale_factor,"
            " autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay);"
            "ALTER TABLE migrated.group_wakes RESET (autovacuum_vacuum_scale_factor,"
            " autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay)"
        )
        assert await db.schema.apply_schema(conn, schema="migrated") == [
            m.version for m in sql.migrations() if m.version >= 26
        ]
        fresh, migrated = await _catalog(conn, "fresh"), await _catalog(conn, "migrated")
        # token_at comes last in the table it was added back to: its place is no shape.
        assert sorted(fresh) == sorted(migrated)
    finally:
        await conn.close()


async def test_migration_26_waits_for_no_writer_of_jobs(empty_dsn: str, kinds: list[str]) -> None:
    # A first version made the group indexes on jobs again (CREATE INDEX IF NOT EXISTS
    # takes a SHARE lock on jobs even when the index exists) after locking group_wakes:
    # it waited for an application's open transaction that had enqueued a job, every
    # other enqueue waited behind it, and that transaction's grouped enqueue deadlocked.
    conn, app = await asyncpg.connect(empty_dsn), await asyncpg.connect(empty_dsn)
    try:
        # Every migration but 26 (a later one that adds a column to jobs waits for the
        # transactions open on it, as any ADD COLUMN does).
        for migration in sql.migrations():
            if migration.version != 26:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO venturi.schema_version (version, name) VALUES ($1, $2) "
                    "ON CONFLICT DO NOTHING",
                    migration.version,
                    migration.name,
                )
        task = noop_task("m26")
        async with app.transaction():
            await task.enqueue(app, Item(1))
            applied = await asyncio.wait_for(
                db.schema.apply_schema(conn, schema="venturi"), timeout=30
            )
            assert applied == [26]
            await task.enqueue(app, Item(2), group="acme")
        assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 2
    finally:
        await conn.close()
        await app.close()


async def test_custom_schema_is_independent(empty_dsn: str) -> None:
    conn = await asyncpg.connect(empty_dsn)
    try:
        await db.schema.apply_schema(conn, schema="tenant_a")
        assert (
            await db.schema.schema_version(conn, schema="tenant_a") == sql.migrations()[-1].version
        )
        with pytest.raises(SchemaError, match="venturi schema apply --schema venturi --dsn <DSN>"):
            await db.schema.schema_version(conn, schema="venturi")
    finally:
        await conn.close()


# --- an upgrade beside a running application -------------------------------------------

# OLD_SCHEMA_ENQUEUE: the application's enqueue on the schema before the upgrade is an
# unkeyed batch, whose statement writes only columns every version has (a keyed job's
# writes unique_for, which migration 28 added).


async def _sessions(dsn: str, *names: str) -> list[asyncpg.Connection]:
    return [
        await asyncpg.connect(dsn, server_settings={"application_name": name}) for name in names
    ]


async def test_an_open_application_transaction_stalls_claims_no_longer_than_the_lock_timeout(
    empty_dsn: str, kinds: list[str]
) -> None:
    # A web request enqueued a job and has not committed yet; the upgrade's migration 24
    # replaces a trigger on jobs (an ACCESS EXCLUSIVE lock). While the apply waits for the
    # request, its queued lock holds every claim and settlement behind it: for as long as
    # it waits, so the wait is bounded and the apply tries again once the request is done.
    plain = noop_task("upgrade_plain")
    setup, web, applier, worker = await _sessions(empty_dsn, "setup", "shop-web", "apply", "w")
    applying: asyncio.Task[list[int]] | None = None
    try:
        await migrated_to(setup, 23)
        await venturi.enqueue_many(setup, [plain.job(Item(i)) for i in range(3)])
        request = web.transaction()
        await request.start()
        await venturi.enqueue_many(web, [plain.job(Item(99))])  # see OLD_SCHEMA_ENQUEUE
        applying = asyncio.create_task(
            db.schema.apply_schema(applier, schema="venturi", lock_timeout=1.0)
        )
        await wait_blocked(setup, applier)
        # Without the bound it waited until the request ended (here: never).
        claimed = await asyncio.wait_for(claim(worker, W, ["upgrade_plain"]), 1.0 + 3.0)
        assert len(claimed) == 1
        await request.commit()
        assert await applying == [m.version for m in sql.migrations() if m.version > 23]
        assert await db.schema.schema_version(setup, schema="venturi") == sql.latest_migration()
    finally:
        if applying is not None and not applying.done():
            applying.cancel()
        for c in (setup, web, applier, worker):
            await c.close()


async def test_an_apply_that_cannot_take_its_locks_names_the_holder_and_applies_nothing(
    empty_dsn: str, kinds: list[str]
) -> None:
    plain = noop_task("upgrade_plain")
    setup, web, applier = await _sessions(empty_dsn, "setup", "shop-web", "apply")
    try:
        await migrated_to(setup, 23)
        request = web.transaction()
        await request.start()
        await venturi.enqueue_many(web, [plain.job(Item(1))])  # see OLD_SCHEMA_ENQUEUE
        with pytest.raises(SchemaError) as raised:
            await db.schema.apply_schema(applier, schema="venturi", lock_timeout=0.2)
        message = str(raised.value)
        assert "\n" not in message
        for needed in (f"pid {web.get_server_pid()}", "'shop-web'", "nothing was applied"):
            assert needed in message, message
        await request.rollback()
        with pytest.raises(SchemaError, match="at version 23"):
            await db.schema.schema_version(setup, schema="venturi")
        # The apply's setting ended with its transaction: the session waits as it did.
        assert await applier.fetchval(tsql.statement("setting_show"), "lock_timeout") == "0"
    finally:
        for c in (setup, web, applier):
            await c.close()
