"""An operator's hands on running workflows (issue 40, section 2), on a real database
with a real worker: run-now never times out a signal's wait unless asked
(``--timeout-now``); ``venturi jobs signal`` and ``admin.send_signal`` send a signal,
journaled with who sent it; ``jobs retry --with-children`` brings a cancelled parent's
children back with it, and without it the parent is told they stay."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec

import venturi
import venturi.testing
from tests.support import Item, running, venturi_cli_async, wait_status
from venturi import Context, admin
from venturi.runtime.worker import Worker


class Approval(msgspec.Struct):
    by: str


def _approver(kind: str, timeout: timedelta | None) -> Any:
    @venturi.task(kind=kind, result=str)
    async def approve(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        try:
            got = await ctx.wait_for_signal("approval", Approval, timeout=timeout)
        except venturi.SignalTimeout:
            return venturi.complete("timed out")
        return venturi.complete(f"approved by {got.by}")

    return approve


async def _events(conn: asyncpg.Connection, job_id: int, event: str) -> list[Any]:
    return [e for e in await venturi.get_journal(conn, job_id) if e.event == event]


async def test_run_now_leaves_a_signal_wait_alone_unless_asked_to_time_it_out(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    approve = _approver("wfo_approve", timedelta(days=2))
    job_id = await approve.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [approve], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
        [change] = await admin.run_now_jobs(conn, [job_id], operator="op")
        assert not change.done
        assert change.message == (
            f"job {job_id} (wfo_approve) waits for signal 'approval': run-now does not time "
            f"it out; send it with `venturi jobs signal {job_id} approval`, or time it out now "
            "with --timeout-now"
        )
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "waiting"
        assert await _events(conn, job_id, "woken") == []
        # The deadline is untouched: two days ahead still.
        deadline = await conn.fetchval(
            "SELECT wake_at > now() + interval '1 day' FROM venturi.steps WHERE job_id = $1",
            job_id,
        )
        assert deadline is True
        [change] = await admin.run_now_jobs(conn, [job_id], operator="op", timeout_now=True)
        assert change.done and "the timeout of signal 'approval' fired now" in change.message
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == "timed out"
    [woken] = await _events(conn, job_id, "woken")
    assert (woken.worker, woken.detail) == ("op", "run now: signal approval timed out")


async def test_a_signal_without_timeout_and_a_wait_on_children_are_refused_by_name(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    approve = _approver("wfo_forever", None)

    @venturi.task(kind="wfo_parent")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kid = await ctx.spawn("kid", approve, Item(2))
        return venturi.complete(await ctx.gather(kid))

    job_id = await parent.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [parent, approve], poll_max=600, concurrency=2)):
        await wait_status(conn, job_id, "waiting")
        detail = await admin.show_job(conn, job_id)
        assert detail is not None
        [kid] = detail.children
        await wait_status(conn, kid.id, "waiting")
        changes = await admin.run_now_jobs(conn, [job_id, kid.id], timeout_now=True)
    assert [c.done for c in changes] == [False, False]
    by_id = {c.id: c.message for c in changes}
    assert by_id[job_id] == (
        f"job {job_id} (wfo_parent) waits for 1 job(s) to finish, not for a timer: run-now "
        "has nothing to wake"
    )
    assert by_id[kid.id] == (
        f"job {kid.id} (wfo_forever) waits for signal 'approval', which has no timeout: "
        f"send it with `venturi jobs signal {kid.id} approval`"
    )


async def test_cli_signal_wakes_the_job_journaled_with_the_operator(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    approve = _approver("wfo_cli", timedelta(days=2))
    job_id = await approve.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [approve], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
        refused = await venturi_cli_async("jobs", "run-now", str(job_id), dsn=dsn)
        assert refused.returncode == 2
        assert "run-now does not time it out" in refused.stderr
        assert "--timeout-now" in refused.stderr
        bad = await venturi_cli_async(
            "jobs", "signal", str(job_id), "approval", "--json", "{nope", dsn=dsn
        )
        assert bad.returncode == 2 and bad.stderr.startswith("venturi: --json is not JSON")
        out = await venturi_cli_async(
            "jobs", "signal", str(job_id), "approval", "--json", '{"by": "maria"}', dsn=dsn
        )
        assert out.returncode == 0, out.stderr
        assert f"job {job_id} (wfo_cli): signal 'approval' sent, waiting -> pending" in out.stdout
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == "approved by maria"
    [woken] = await _events(conn, job_id, "woken")
    assert woken.worker is not None and woken.worker.startswith("operator:")
    assert woken.detail == "signal approval sent by an operator"
    finished = await venturi_cli_async("jobs", "signal", str(job_id), "approval", dsn=dsn)
    assert finished.returncode == 2
    assert "is completed: only an unfinished job takes a signal" in finished.stderr
    help_text = (await venturi_cli_async("jobs", "run-now", "--help")).stdout
    assert "--timeout-now" in help_text and "SignalTimeout" in help_text


async def test_a_signal_sent_before_the_wait_is_found_and_the_first_wins(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    approve = _approver("wfo_early", None)
    job_id = await approve.enqueue(conn, Item(1))
    sent = await admin.send_signal(conn, job_id, "approval", {"by": "ana"}, operator="op")
    assert sent.done and sent.now == "pending"
    assert "and finds it when it waits for it" in sent.message
    second = await admin.send_signal(conn, job_id, "approval", {"by": "bo"}, operator="op")
    assert not second.done and "the first of a name wins" in second.message
    [released] = await _events(conn, job_id, "released")
    assert released.worker == "op"
    assert released.detail == "signal approval sent by an operator, not waited for yet"
    async with running(Worker(None, dsn, [approve], poll_max=600)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == "approved by ana"
    missing = await admin.send_signal(conn, 10**12, "approval")
    assert not missing.done and missing.message == f"job {10**12} does not exist"


def _family(kind: str) -> tuple[Any, Any]:
    @venturi.task(kind=f"{kind}_child", result=int)
    async def child(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind=kind, max_failures=1)
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kids = [await ctx.spawn(f"c{i}", child, Item(i)) for i in range(2)]
        return venturi.complete(sum(await ctx.gather(*kids)))

    return parent, child


async def _cancelled_family(dsn: str, conn: asyncpg.Connection, parent: Any) -> list[int]:
    """The parent waiting on its two children (not run: their kind is not served),
    then cancelled with them; its id and theirs."""
    job_id = await parent.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [parent], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
    [change] = await admin.cancel_jobs(conn, [job_id], operator="op")
    assert change.done, change.message
    kids = [
        r["id"]
        for r in await conn.fetch(
            "SELECT id FROM venturi.jobs WHERE parent_id = $1 ORDER BY id", job_id
        )
    ]
    for kid in kids:
        await wait_status(conn, kid, "cancelled")
    return [job_id, *kids]


async def test_retry_with_children_brings_a_cancelled_parent_back_whole(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, child = _family("wfo_fam")
    job_id, *kids = await _cancelled_family(dsn, conn, parent)
    # Without --with-children: the parent alone, told that its gather fails again.
    [alone] = await admin.retry_jobs(conn, [job_id], operator="op")
    assert alone.done
    assert alone.message == (
        f"job {job_id} (wfo_fam): cancelled -> pending; 2 of its children ended dead or "
        "cancelled and stay so: its gather raises ChildFailed again unless they are retried "
        "too (--with-children)"
    )
    async with running(Worker(None, dsn, [parent, child], poll_max=600)):
        await wait_status(conn, job_id, "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and "ChildFailed" in (job.last_error or "")
    # With it, from the command line: the parent and both children, each reported.
    out = await venturi_cli_async(
        "jobs", "retry", str(job_id), "--with-children", "--json", dsn=dsn
    )
    assert out.returncode == 0, out.stderr
    changes = json.loads(out.stdout)
    assert [(c["id"], c["done"], c["now"]) for c in changes] == [
        (i, True, "pending") for i in sorted([job_id, *kids])
    ]
    async with running(Worker(None, dsn, [parent, child], poll_max=600)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == 1
    help_text = (await venturi_cli_async("jobs", "retry", "--help")).stdout
    assert "--with-children" in help_text


async def test_a_signals_deadline_is_no_step_in_show_json_or_the_cli(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfo_timed", result=str)
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("prepare", _one)
        try:
            await ctx.wait_for_signal("approval", Approval, timeout=timedelta(days=2))
        except venturi.SignalTimeout:
            return venturi.complete("timed out")
        return venturi.complete("approved")

    job_id = await flow.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [flow], timers=False)
    # The deadline is recorded (the timer run-now and the worker read)...
    names = await conn.fetch("SELECT name FROM venturi.steps WHERE job_id = $1", job_id)
    assert len(names) == 2
    # ...and appears nowhere as a step: not in show, the JSON, the CLI or the page's view.
    detail = await admin.show_job(conn, job_id)
    assert detail is not None and [s.name for s in detail.steps] == ["prepare"]
    view = await admin.workflow_view(conn, job_id)
    assert (
        view is not None and view.steps_total == 1 and [s.name for s in view.steps] == ["prepare"]
    )
    shown = await venturi_cli_async("jobs", "show", str(job_id), dsn=dsn)
    assert (
        "prepare" in shown.stdout and "deadline" not in shown.stdout and "\x1f" not in shown.stdout
    )
    as_json = await venturi_cli_async("jobs", "show", str(job_id), "--json", dsn=dsn)
    assert [s["name"] for s in json.loads(as_json.stdout)["steps"]] == ["prepare"]
    # Timed out, the timed-out record stays out too.
    await admin.run_now_jobs(conn, [job_id], timeout_now=True)
    await venturi.testing.drain(dsn, [flow], timers=False)
    assert await venturi.get_result(conn, job_id) == "timed out"
    detail = await admin.show_job(conn, job_id)
    assert detail is not None and [s.name for s in detail.steps] == ["prepare"]


def _one() -> int:
    return 1


async def test_a_parent_waiting_on_children_of_a_paused_kind_says_so(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, child = _family("wfo_paused")
    await admin.pause_kinds(conn, [child.kind], reason="maintenance", operator="op")
    job_id = await parent.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [parent], timers=False)
    detail = await admin.show_job(conn, job_id)
    assert detail is not None and detail.waiting_for is not None
    assert detail.waiting_for.paused_kinds == ["wfo_paused_child"]
    assert not detail.kind_paused
    kid = await admin.show_job(conn, detail.children[0].id)
    assert kid is not None and kid.kind_paused and kid.job.status == "pending"
    shown = await venturi_cli_async("jobs", "show", str(job_id), dsn=dsn)
    assert "paused: wfo_paused_child (they wait until resumed)" in shown.stdout
    shown = await venturi_cli_async("jobs", "show", str(kid.job.id), dsn=dsn)
    assert "wfo_paused_child is paused: venturi kinds resume wfo_paused_child" in " ".join(
        shown.stdout.split()
    )
    await admin.resume_kinds(conn, [child.kind])
    detail = await admin.show_job(conn, job_id)
    assert detail is not None and detail.waiting_for is not None
    assert detail.waiting_for.paused_kinds == []


async def test_a_payload_that_never_decoded_is_not_said_to_no_longer_decode(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    approve = _approver("wfo_bad_payload", None)
    job_id = await approve.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [approve], timers=False)
    assert await venturi.signal(conn, job_id, "approval", "not an Approval")
    await venturi.testing.drain(dsn, [approve], timers=False)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "dead"
    assert job.last_error == (
        f"signal 'approval' of job {job_id}: the payload sent does not decode as Approval: "
        "Expected `object`, got `str`"
    )
