"""Reading EXPLAIN (FORMAT JSON) plans in tests."""

from __future__ import annotations

from typing import Any

from venturi import sql


def nodes(plan: Any) -> list[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(plan)
    return found


async def generic_plan(conn: Any, statement: str, *args: Any) -> list[dict[str, Any]]:
    """Every node of runtime statement ``statement``'s generic plan (the one a worker's
    held statement keeps) for ``args``; ``conn``'s session keeps ``plan_cache_mode =
    force_generic_plan`` after."""
    await conn.execute(
        sql.statement("maintenance/session_setting"), "plan_cache_mode", "force_generic_plan"
    )
    stmt = await conn.prepare(sql.statement(statement))
    return nodes(await stmt.explain(*args))
