"""``venturi groups set | list | show`` and ``venturi jobs list --group`` (SPEC 13), as an
operator runs them: real processes against a real database; bad input is one line and
writes nothing."""

from __future__ import annotations

import json

import asyncpg

from tests.support import venturi_cli
from tests.support.cli import one_line_error
from venturi import JobSpec, enqueue_many

KIND = "export"


async def seed(conn: asyncpg.Connection) -> list[int]:
    """Jobs of two groups and one without, enqueued as an application would (no task
    module needed: the CLI knows no task)."""
    specs = [JobSpec(KIND, "{}", 1, None, None, None, 25, group="acme") for _ in range(3)]
    specs += [JobSpec(KIND, "{}", 1, None, None, None, 25, group="globex")]
    specs += [JobSpec(KIND, "{}", 1, None, None, None, 25)]
    return await enqueue_many(conn, specs)


async def test_set_list_and_show_a_group(dsn: str, conn: asyncpg.Connection) -> None:
    ids = await seed(conn)
    out = venturi_cli("groups", "set", KIND, "acme", "--cap", "2", "--weight", "3", dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # a kind jobs have: no warning
    # The weight as groups list prints it (it said "weight 3.0" here, "3" in the list).
    assert out.stdout.strip() == "export acme: cap 2, weight 3, active"

    listed = json.loads(venturi_cli("groups", "list", KIND, "--json", dsn=dsn).stdout)
    assert [(g["group"], g["pending"], g["cap"], g["weight"]) for g in listed] == [
        ("acme", 3, 2, 3.0),
        ("globex", 1, None, None),
    ]
    table = venturi_cli("groups", "list", KIND, "--search", "glob", dsn=dsn).stdout
    assert "globex" in table and "acme" not in table
    # In any case: an operator types "Acme" for "acme" (the name is matched as written
    # elsewhere: this is a search box, not a key).
    table = venturi_cli("groups", "list", KIND, "--search", "GLOB", dsn=dsn).stdout
    assert "globex" in table and "acme" not in table

    out = venturi_cli("groups", "set", KIND, "acme", "--pause", dsn=dsn)
    assert out.stdout.strip().endswith("paused")
    shown = venturi_cli("groups", "show", KIND, "acme", dsn=dsn).stdout
    assert "pending: 3" in shown and "pending jobs wait: group paused" in shown
    # jobs show says why the job waits.
    detail = venturi_cli("jobs", "show", str(ids[0]), dsn=dsn).stdout
    assert "acme" in detail and "group paused" in detail
    # Back to the defaults.
    out = venturi_cli(
        "groups",
        "set",
        KIND,
        "acme",
        "--cap",
        "default",
        "--weight",
        "default",
        "--resume",
        dsn=dsn,
    )
    assert out.stdout.strip() == "export acme: cap default, weight default, active"

    rows = json.loads(venturi_cli("jobs", "list", "--group", "globex", "--json", dsn=dsn).stdout)
    assert [r["id"] for r in rows] == [ids[3]] and rows[0]["group"] == "globex"
    # Exact, as set prints it (":g" printed 123457).
    out = venturi_cli("groups", "set", KIND, "globex", "--weight", "123456.7", dsn=dsn)
    assert out.stdout.strip() == "export globex: cap default, weight 123456.7, active"
    listed_row = venturi_cli("groups", "list", KIND, "--search", "globex", dsn=dsn).stdout
    assert listed_row.splitlines()[1].split()[4] == "123456.7", listed_row


async def test_bad_group_input_is_one_line_and_writes_nothing(
    dsn: str, conn: asyncpg.Connection
) -> None:
    await seed(conn)
    before = await conn.fetch("SELECT * FROM venturi.groups ORDER BY kind, grp")
    for args, needle in (
        (["groups", "set", KIND, "", "--cap", "2"], "group must be a non-empty string"),
        # The command line's spelling of None is `default`; the text is echoed as typed
        # (`--weight 0` said "got 0.0", `--weight -2` "got -2.0").
        (
            ["groups", "set", KIND, "acme", "--cap", "0"],
            "cap must be an integer >= 1 (or default), got 0\n",
        ),
        (
            ["groups", "set", KIND, "acme", "--weight", "0"],
            "weight must be a finite number above 0 (or default), got 0\n",
        ),
        (["groups", "set", KIND, "acme", "--weight", "-2"], "(or default), got -2\n"),
        (
            ["groups", "set", KIND, "acme", "--weight", "1e-9"],
            "weight must be from 1e-06 to 1,000,000 (or default), got 1e-9\n",
        ),
        (["groups", "set", KIND, "acme", "--weight", "abc"], "(or default), got 'abc'\n"),
        (["groups", "set", KIND, "acme", "--cap", "two"], "cap must be"),
        (["groups", "set", KIND, "acme", "--cap", "2147483648"], "cap must be at most"),
        (["groups", "set", KIND, "acme", "--weight", "nan"], "weight must be a finite number"),
        (["groups", "set", KIND, "acme", "--weight", "-1"], "weight must be"),
        (["groups", "set", KIND, "acme"], "nothing to set"),
        # Both flags: click's pair let the last one win, pausing or resuming unasked.
        (["groups", "set", KIND, "acme", "--pause", "--resume"], "not both"),
        (["groups", "set", KIND, "acme", "--resume", "--pause"], "not both"),
        (["groups", "show", KIND, "nobody"], "no group 'nobody' of kind 'export'"),
        (["jobs", "list", "--group", ""], "group must be a non-empty string"),
        # The reads check what they are given as the writes do, not the database.
        (["groups", "list", ""], "kind must be a non-empty string"),
        (["groups", "show", "", "acme"], "kind must be a non-empty string"),
        (["groups", "show", "\udcff", "acme"], "kind must be valid Unicode"),
        (["groups", "list", KIND, "--search", "\udcff"], "search must be text"),
        (["groups", "list", KIND, "--limit", "2", "--offset", "2147483647"], "limit + offset"),
    ):
        one_line_error(venturi_cli(*args, dsn=dsn), needle)
    assert await conn.fetch("SELECT * FROM venturi.groups ORDER BY kind, grp") == before


async def test_setting_a_group_of_a_kind_nothing_has_warns_and_sets_it(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # A group may be set up before its kind is deployed, so it is set; but a kind no job,
    # schedule or running worker has is most often misspelt (as `kinds pause` warns).
    await seed(conn)
    out = venturi_cli("groups", "set", "exprot", "acme", "--cap", "2", dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exprot acme: cap 2, weight default, active"
    assert out.stderr.strip() == (
        "venturi: warning: no job, schedule or running worker has kind 'exprot' (yet);"
        " set anyway, check the spelling"
    )
    shown = json.loads(venturi_cli("groups", "show", "exprot", "acme", "--json", dsn=dsn).stdout)
    assert shown["cap"] == 2


async def test_a_group_or_kind_named_like_markup_is_listed_as_written(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # The table is drawn by rich, whose markup a name must not be: "[/]" made the command
    # fail with a traceback, and "[bold]acme[/bold]" showed as "acme".
    names = ["[/]", "[bold]acme[/bold]"]
    await enqueue_many(conn, [JobSpec(KIND, "{}", 1, None, None, None, 25, group=g) for g in names])
    out = venturi_cli("groups", "list", KIND, dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert all(g in out.stdout for g in names), out.stdout
    out = venturi_cli("groups", "list", "[b]x[/b]", dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no group of [b]x[/b] has work"


async def test_a_long_group_name_is_shown_whole(dsn: str, conn: asyncpg.Connection) -> None:
    # Tenants' names share long prefixes; a name cut to "org-7f3a9c2e-4b1…" told two
    # groups apart in neither groups list nor jobs show, and could not be copied.
    name = "org-" + "0123456789abcdef" * 12 + "-end"
    [job] = await enqueue_many(conn, [JobSpec(KIND, "{}", 1, None, None, None, 25, group=name)])
    for columns in ("80", "160"):
        out = venturi_cli("groups", "list", KIND, dsn=dsn, env={"COLUMNS": columns})
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].split()[0] == "group" and "…" not in out.stdout
        # The group column, folded: its pieces start each line below the header.
        assert "".join(line.split()[0] for line in lines[1:] if line.strip()) == name
        shown = venturi_cli("jobs", "show", str(job), dsn=dsn, env={"COLUMNS": columns})
        assert name in "".join(shown.stdout.split()) and "…" not in shown.stdout
    out = venturi_cli("groups", "list", KIND, "--search", "nobody", dsn=dsn)
    assert out.stdout.strip() == "no group of export whose name holds 'nobody' has work"


async def test_a_group_with_backslashes_is_listed_and_shown_as_written(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # rich.markup.escape doubled a trailing backslash ("trailing\\" printed for
    # "trailing\") and let "\[" through as an escaped bracket ("a[b" for "a\[b").
    names = ["trailing\\", "a\\[b"]
    ids = await enqueue_many(
        conn, [JobSpec(KIND, "{}", 1, None, None, None, 25, group=g) for g in names]
    )
    out = venturi_cli("groups", "list", KIND, dsn=dsn)
    assert out.returncode == 0, out.stderr
    listed = sorted(line.split()[0] for line in out.stdout.splitlines()[1:] if line.strip())
    assert listed == sorted(names), out.stdout
    for job_id, name in zip(ids, names, strict=True):
        shown = venturi_cli("jobs", "show", str(job_id), dsn=dsn).stdout
        [group] = [
            line.split(None, 1)[1].strip()
            for line in shown.splitlines()
            if line.startswith("group ")
        ]
        assert group == name, shown


# Names an operator could not tell apart as printed, and how each prints: a name that
# does not read as itself (spaces at an end or only spaces, an invisible character, a
# leading quote) prints as its Python repr; a plain one as it is.
LOOK_ALIKES = {
    "acme": "acme",
    "acme ": "'acme '",
    "acme\u200b": "'acme\\u200b'",
    " ": "' '",
    "'acme '": "\"'acme '\"",
}


async def test_look_alike_groups_print_apart(dsn: str, conn: asyncpg.Connection) -> None:
    # "acme", "acme " and "acme\u200b" were three rows reading "acme" in groups list.
    ids = await enqueue_many(
        conn, [JobSpec(KIND, "{}", 1, None, None, None, 25, group=g) for g in LOOK_ALIKES]
    )
    out = venturi_cli("groups", "list", KIND, dsn=dsn, env={"COLUMNS": "160"})
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()[1:]
    for shown in LOOK_ALIKES.values():
        assert len([r for r in rows if r.startswith(shown + " ")]) == 1, (shown, out.stdout)
    for (name, shown), job_id in zip(LOOK_ALIKES.items(), ids, strict=True):
        out = venturi_cli("groups", "show", KIND, "--", name, dsn=dsn)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == f"group: {shown}", out.stdout
        detail = venturi_cli("jobs", "show", str(job_id), dsn=dsn).stdout
        [group] = [line[5:].strip() for line in detail.splitlines() if line.startswith("group ")]
        assert group == shown, detail
    out = venturi_cli("groups", "set", KIND, "acme ", "--cap", "2", dsn=dsn)
    assert out.stdout.startswith(f"{KIND} 'acme ': cap 2"), out.stdout
    # A group that starts with '-' is named after `--`, as the commands' help says.
    await enqueue_many(conn, [JobSpec(KIND, "{}", 1, None, None, None, 25, group="-x")])
    out = venturi_cli("groups", "set", KIND, "--cap", "2", "--", "-x", dsn=dsn)
    assert out.returncode == 0 and out.stdout.startswith(f"{KIND} -x: cap 2"), out
    for command in ("set", "show"):
        help_text = venturi_cli("groups", command, "--help", env={"COLUMNS": "200"}).stdout
        assert "-- -name" in help_text, help_text


async def test_a_group_breaking_a_line_prints_on_one_line(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # A new job's group may not hold U+2028 or U+2029; a group an older release named so
    # is named by the operator's commands all the same, and printed escaped, on one line.
    for args in (
        ["groups", "set", KIND, "x\u2028y", "--cap", "2"],
        ["groups", "show", KIND, "x\u2028y"],
        ["jobs", "list", "--group", "x\u2029y"],
    ):
        out = venturi_cli(*args, dsn=dsn)
        assert out.returncode == 0, out.stderr
        assert "\u2028" not in out.stdout and "\u2029" not in out.stdout, out.stdout
    assert "'x\\u2028y'" in venturi_cli("groups", "show", KIND, "x\u2028y", dsn=dsn).stdout


async def test_a_page_past_the_last_says_so(dsn: str, conn: asyncpg.Connection) -> None:
    # It said "no group of export has work", of a kind whose groups have work.
    await seed(conn)
    out = venturi_cli("groups", "list", KIND, "--offset", "10", "--limit", "3", dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no groups of export past offset 10"
    out = venturi_cli("groups", "list", KIND, "--search", "glob", "--offset", "1", dsn=dsn)
    assert out.stdout.strip() == ("no groups of export whose name holds 'glob' past offset 1")


async def test_a_commands_line_prints_no_control_character_of_a_name(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # "paused kesc\x1b[2J", "job 5 (kcr\rOVER) ...": a kind's ESC cleared the operator's
    # screen, a CR overwrote the line, a newline split it.
    for args in (
        ["kinds", "pause", "k\x1b[2J", "--reason", "why\x07"],
        ["kinds", "resume", "k\x1b[2J"],
        ["groups", "set", "k\rOVER", "acme", "--cap", "2"],
        ["groups", "show", "k\rOVER", "acme"],
    ):
        out = venturi_cli(*args, dsn=dsn)
        assert out.returncode == 0, out.stderr
        said = out.stdout + out.stderr
        assert not any(c in said for c in "\x1b\x07\r"), said
        assert "\\x1b" in said or "\\r" in said, said
