"""The command line's error paths: each is one line on stderr, a non-zero exit, no
traceback, run as a real subprocess."""

from __future__ import annotations

import socket
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import running, venturi_cli, venturi_cli_async, wait_for
from venturi import admin, db
from venturi.runtime.worker import Worker

UNREACHABLE = "postgresql://me@127.0.0.1:1/db"


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a refused command (exit 2, nothing on stdout)."""
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stdout == ""
    return out.stderr.rstrip("\n")


def module(tmp_path: Path, name: str, source: str) -> Path:
    (tmp_path / f"{name}.py").write_text(
        "import venturi\n\n" + textwrap.dedent(source), encoding="utf-8"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            """
            @venturi.task("tick", cron="61 * * * *")
            async def tick(ctx, carry: None) -> None: ...
            """,
            "venturi: importing 'tasks': cron: invalid expression '61 * * * *'",
        ),
        (
            """
            @venturi.task("job", lease=-5)
            async def job(ctx, carry: dict) -> None: ...
            """,
            "venturi: importing 'tasks': lease must be positive, got -5",
        ),
        (
            """
            @venturi.task("job")
            async def job(ctx, carry) -> None: ...
            """,
            "venturi: importing 'tasks': task 'job': carry: the handler's second parameter "
            "'carry' needs a type annotation (a msgspec.Struct or any msgspec-supported type)",
        ),
    ],
    ids=["bad-cron", "negative-lease", "missing-carry-annotation"],
)
def test_worker_on_a_module_whose_import_raises_config_error(
    tmp_path: Path, source: str, message: str
) -> None:
    out = venturi_cli(
        "worker", "tasks", "--dsn", UNREACHABLE, cwd=module(tmp_path, "tasks", source)
    )
    assert one_line_error(out) == message


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            """
            @venturi.task("job")
            async def job(ctx, carry: dict) -> None: ...

            raise RuntimeError("no SMTP_HOST in the environment")
            """,
            "raised RuntimeError: no SMTP_HOST in the environment ({path}, line 7)",
        ),
        ("def broken(:\n    pass\n", "raised SyntaxError: invalid syntax (tasks.py, line 3)"),
    ],
    ids=["runtime-error", "syntax-error"],
)
def test_worker_on_a_module_that_raises_at_import(tmp_path: Path, source: str, said: str) -> None:
    # docs/worker.md: an error before the worker starts is one line and exit code 2.
    here = module(tmp_path, "tasks", source)
    out = venturi_cli("worker", "tasks", "--dsn", UNREACHABLE, cwd=here)
    assert one_line_error(out) == (
        f"venturi: importing 'tasks' {said.format(path=here / 'tasks.py')}; "
        "--log-level debug shows the traceback"
    )
    # At debug level the traceback is logged, and the error is still the last line.
    debug = venturi_cli("worker", "tasks", "--dsn", UNREACHABLE, "--log-level", "debug", cwd=here)
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr
    assert (
        debug.stderr.splitlines()[-1]
        == f"venturi: importing 'tasks' {said.format(path=here / 'tasks.py')}"
    )


def test_worker_with_an_empty_module_name() -> None:
    out = venturi_cli("worker", "", "--dsn", UNREACHABLE)
    assert one_line_error(out) == (
        "venturi: no module given: name the module that declares the tasks, e.g. app.tasks"
    )


@pytest.mark.parametrize("given", ["app/tasks.py", "app/tasks.py:make_state", "./app/tasks"])
def test_worker_given_a_file_path_says_to_use_the_dotted_name(given: str) -> None:
    out = venturi_cli("worker", given, "--dsn", UNREACHABLE)
    path = given.partition(":")[0]
    assert one_line_error(out) == (
        f"venturi: {path!r} is a file path: give the dotted module name instead, "
        "e.g. app.tasks (from the directory that holds its top package)"
    )


def test_worker_with_a_state_factory_that_raises(tmp_path: Path) -> None:
    here = module(
        tmp_path,
        "tasks",
        """
        @venturi.task("job")
        async def job(ctx, carry: dict) -> None: ...

        def make_state():
            raise RuntimeError("no SMTP_HOST in the environment")
        """,
    )
    out = venturi_cli("worker", "tasks:make_state", "--dsn", UNREACHABLE, cwd=here)
    assert one_line_error(out) == (
        "venturi: STATE tasks:make_state raised RuntimeError: no SMTP_HOST in the environment"
    )


async def test_worker_with_a_metrics_port_in_use(dsn: str, tmp_path: Path) -> None:
    here = module(
        tmp_path,
        "tasks",
        """
        @venturi.task("job")
        async def job(ctx, carry: dict) -> None: ...
        """,
    )
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = await venturi_cli_async(
            "worker", "tasks", "--metrics-port", str(port), "--dsn", dsn, cwd=here
        )
    assert one_line_error(out) == (
        f"venturi: metrics-port {port}: cannot listen (Address already in use); "
        "choose a free port or stop what holds it"
    )


@pytest.mark.parametrize("bad", ["0", "1", "none", "None", "-3", "four"])
def test_priority_ratio_names_its_one_spelling_of_strict(bad: str) -> None:
    out = venturi_cli(
        "worker", "tests.support.workertasks", "--priority-ratio", bad, "--dsn", UNREACHABLE
    )
    assert one_line_error(out) == (
        "venturi: priority-ratio must be an integer >= 2, or 'strict' for strict priority, "
        f"got {bad!r}"
    )


@pytest.mark.parametrize("good", ["strict", "STRICT", "Strict", "2", "7"])
def test_priority_ratio_accepts_strict_and_integers(good: str) -> None:
    # Accepted: the worker goes on to connect, and the unreachable database is the error.
    out = venturi_cli(
        "worker", "tests.support.workertasks", "--priority-ratio", good, "--dsn", UNREACHABLE
    )
    assert one_line_error(out).startswith("venturi: cannot connect to ")


async def test_kinds_pause_warns_about_a_kind_nothing_has(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task("known_kind")
    async def handler(ctx: venturi.Context[Any], carry: dict[str, int]) -> None:
        return None

    await handler.enqueue(conn, {"n": 1})
    out = await venturi_cli_async("kinds", "pause", "known_kind", "knwon_kind", "--dsn", dsn)
    # Pausing a kind before it is deployed is legitimate: paused, exit 0, one warning.
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["paused known_kind", "paused knwon_kind"]
    assert out.stderr.splitlines() == [
        "venturi: warning: no job, schedule or running worker has kind 'knwon_kind' (yet); "
        "paused anyway, check the spelling"
    ]
    paused = [r["kind"] for r in await db.kinds.kind_paused_list(conn, schema="venturi")]
    assert paused == ["known_kind", "knwon_kind"]


async def test_kinds_pause_refuses_an_empty_kind_and_writes_nothing(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # It paused '' (no task can have it) and warned only that nothing had the kind.
    for command in ("pause", "resume"):
        out = await venturi_cli_async("kinds", command, "", "--dsn", dsn)
        assert out.returncode == 2 and out.stderr.strip() == (
            "venturi: kind must be a non-empty string of at most 200 characters, got ''"
        ), out.stderr
    assert await db.kinds.kind_paused_list(conn, schema="venturi") == []
    with pytest.raises(venturi.ConfigError, match="reason must be a string without NUL"):
        await admin.pause_kinds(conn, ["k"], reason="a\x00b")


async def test_kinds_pause_knows_a_kind_a_running_worker_registered(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task("deployed_kind")
    async def handler(ctx: venturi.Context[Any], carry: dict[str, int]) -> None:
        return None

    # No job and no schedule yet, but a live worker serves it: no warning (issue 40).
    async with running(Worker(None, dsn, [handler], poll_max=600)):
        await wait_for(lambda: conn.fetchval("SELECT count(*) = 1 FROM venturi.workers"), 15)
        out = await venturi_cli_async("kinds", "pause", "deployed_kind", "--dsn", dsn)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["paused deployed_kind"] and out.stderr == ""


async def test_worker_started_while_the_server_refuses_writes_is_one_line(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    # A DSN asking for a read-write server while the only server refuses writes (the
    # chaos soak's read-only window; a standby not promoted yet): asyncpg raises one of
    # its internal client errors, which crashed the worker with a traceback.
    here = module(
        tmp_path,
        "tasks",
        """
        @venturi.task("job")
        async def job(ctx, carry: dict) -> None: ...
        """,
    )
    name = await conn.fetchval("SELECT current_database()")
    await conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    try:
        sep = "&" if "?" in dsn else "?"
        out = await venturi_cli_async(
            "worker", "tasks", "--dsn", f"{dsn}{sep}target_session_attrs=read-write", cwd=here
        )
    finally:
        await conn.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    line = one_line_error(out)
    assert line.startswith("venturi: cannot connect to ") and "read-write" in line, line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["groups", "list", "k", "--limit", "abc"], "Invalid value for '--limit'"),
        (["groups", "set", "k", "g", "--cap"], "Option '--cap' requires an argument."),
        (["groups", "set", "k", "g", "--nope"], "No such option: --nope"),
        (["nosuch"], "No such command 'nosuch'."),
        (["jobs", "show"], "Missing argument"),
    ],
)
def test_a_usage_error_is_one_line(args: list[str], said: str) -> None:
    # click's usage text and its error box were six lines on stderr.
    line = one_line_error(venturi_cli(*args))
    assert line.startswith("venturi: ") and said in line and "--help)" in line, line


@pytest.mark.parametrize("args", [[], ["groups"], ["schema"]])
def test_a_group_without_its_command_shows_its_help_once(args: list[str]) -> None:
    # Typer prints it before raising; shown again by click's own show() it was twice.
    out = venturi_cli(*args)
    assert out.returncode == 2 and out.stdout.count("Usage:") == 1, out.stdout
    assert out.stderr == ""
