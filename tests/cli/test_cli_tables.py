"""The tables for people keep every column whole when a value is wide or the terminal
narrow: a long kind folds onto more lines, as a group's name does, instead of squeezing
the id and status of every row to "…". Real processes against a real database."""

from __future__ import annotations

import asyncpg

from tests.support import venturi_cli_async
from venturi import JobSpec, enqueue_many

LONG = "q" * 200  # the longest kind there can be; "q" is in no header or status


async def test_jobs_list_folds_a_long_kind_and_keeps_ids_and_statuses(
    dsn: str, conn: asyncpg.Connection
) -> None:
    specs = [JobSpec(k, "{}", 1, None, None, None, 25) for k in ("mail", LONG, "mail")]
    ids = await enqueue_many(conn, specs)
    out = await venturi_cli_async("jobs", "list", dsn=dsn)  # piped: 160 columns
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.split()[:1] != ["id"]]
    firsts = [r for r in rows if r[0].isdigit()]
    assert [int(r[0]) for r in firsts] == sorted(ids, reverse=True), out.stdout
    assert all(r[2:4] == ["pending", "normal"] for r in firsts), out.stdout
    assert out.stdout.count("q") == 200  # the kind whole, on several lines
    assert max(map(len, out.stdout.splitlines())) <= 160


async def test_kinds_list_on_a_narrow_terminal_keeps_every_column(
    dsn: str, conn: asyncpg.Connection
) -> None:
    kind = "nightly_invoice_reconciliation"
    await enqueue_many(conn, [JobSpec(k, "{}", 1, None, None, None, 25) for k in (kind, "mail")])
    paused = await venturi_cli_async(
        "kinds", "pause", kind, "--reason", "maintenance window", dsn=dsn
    )
    assert paused.returncode == 0, paused.stderr
    out = await venturi_cli_async("kinds", "list", dsn=dsn, env={"COLUMNS": "40"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "…" not in text, text
    lines = text.splitlines()
    assert max(map(len, lines)) <= 40, text
    # Each column whole, folded down its own width: read it back line by line.
    [header] = [n for n, line in enumerate(lines) if line.startswith("kind ")]
    starts = [lines[header].index(name) for name in ("state", "by", "reason")]

    def column(start: int, end: int | None = None) -> str:
        return "".join(line[start:end].strip() for line in lines[header + 1 :])

    assert kind in column(0, starts[0]), text
    assert column(starts[0], starts[0] + 6) == "activepaused", text
    assert "maintenancewindow" in column(starts[2]), text
