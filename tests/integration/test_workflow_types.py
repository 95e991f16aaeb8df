"""A step's return annotation or ``wait_for_signal``'s type that msgspec cannot decode
(a union of two models): the job settles dead at once, naming the step and the type,
before the step's function runs or the job waits; never a retry loop that ends at
``max_failures`` hours later, with the function's side effect done."""

from __future__ import annotations

from typing import Any, Literal

import asyncpg
import pydantic
from pydantic import BaseModel

import venturi
import venturi.testing
from venturi import Context


class Paid(BaseModel):
    kind: Literal["paid"] = "paid"
    amount: int


class Declined(BaseModel):
    kind: Literal["declined"] = "declined"
    reason: str


async def test_an_undecodable_step_or_signal_type_settles_dead_before_anything_runs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    charges: list[int] = []

    def charge(n: int) -> Paid | Declined:
        charges.append(n)
        return Paid(amount=n)

    @venturi.task(kind="wt_step", max_failures=4, backoff=venturi.Backoff.fixed(0.05))
    async def flow(ctx: Context[Any], carry: int) -> venturi.Outcome:
        return venturi.complete(await ctx.step("charge", charge, carry))

    either: Any = Paid | Declined

    @venturi.task(kind="wt_signal", max_failures=4, backoff=venturi.Backoff.fixed(0.05))
    async def waits(ctx: Context[Any], carry: int) -> venturi.Outcome:
        return venturi.complete(await ctx.wait_for_signal("outcome", either))

    step_job = await flow.enqueue(conn, 5)
    signal_job = await waits.enqueue(conn, 5)
    await venturi.testing.drain(dsn, [flow, waits])
    assert charges == []
    for job_id, what in ((step_job, "step 'charge'"), (signal_job, "signal 'outcome'")):
        info = await venturi.get_job(conn, job_id)
        assert info is not None
        assert (info.status, info.failures) == ("dead", 0), info.last_error
        assert info.last_error is not None
        assert info.last_error.startswith(f"{what} of job {job_id}: ")
        assert ".Paid | tests.integration.test_workflow_types.Declined is not a type msgspec" in (
            info.last_error
        )


class Creds(BaseModel):
    user: str
    token: pydantic.SecretStr


async def test_a_step_returning_a_model_stored_masked_settles_dead_before_it_runs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    logins: list[str] = []

    def login(user: str) -> Creds:
        logins.append(user)
        return Creds(user=user, token=pydantic.SecretStr("s3cret"))

    @venturi.task(kind="wt_creds", max_failures=4, backoff=venturi.Backoff.fixed(0.05))
    async def flow(ctx: Context[Any], carry: str) -> venturi.Outcome:
        creds = await ctx.step("login", login, carry)
        return venturi.complete(creds.user)

    job_id = await flow.enqueue(conn, "ana")
    await venturi.testing.drain(dsn, [flow])
    assert logins == []
    info = await venturi.get_job(conn, job_id)
    assert info is not None
    assert (info.status, info.failures, info.last_error) == (
        "dead",
        0,
        f"step 'login' of job {job_id}: Creds cannot be stored as it is: "
        "Creds.token is a SecretStr, stored masked as '**********'",
    )
