"""Pydantic v2 models (the ``pydantic`` extra) as carries, results, step values and
signal payloads, on a real database with a real worker: validated at enqueue with
Pydantic's own error in one line and nothing written; decoded back into the model in the
handler, by replayed steps, ``wait_for_signal``, ``gather`` and ``result_of``; nested in a
Struct; dataclasses and attrs classes as before."""

from __future__ import annotations

import dataclasses
from typing import Any

import asyncpg
import attrs
import msgspec
import pydantic
import pytest

import venturi
import venturi.testing
from venturi import Context


class Signup(pydantic.BaseModel):
    email: str
    seats: int = pydantic.Field(gt=0)


class Receipt(pydantic.BaseModel):
    email: str
    total: int


class Approval(pydantic.BaseModel):
    by: str


class Batch(msgspec.Struct):
    signups: list[Signup]


@dataclasses.dataclass
class Plain:
    n: int


@attrs.define
class Attr:
    n: int


seen: list[Any] = []


async def test_models_round_trip_through_a_workflow(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen.clear()
    runs = {"price": 0}

    def price(signup: Signup) -> Receipt:
        runs["price"] += 1
        return Receipt(email=signup.email, total=signup.seats * 10)

    @venturi.task(kind="pyd_child", result=Receipt)
    async def child(ctx: Context[Any], carry: Signup) -> venturi.Outcome:
        return venturi.complete(Receipt(email=carry.email, total=carry.seats))

    @venturi.task(kind="pyd_flow", result=Receipt)
    async def flow(ctx: Context[Any], carry: Signup) -> venturi.Outcome:
        seen.append(carry)
        receipt = await ctx.step("price", price, carry)
        seen.append(receipt)
        approval = await ctx.wait_for_signal("approval", Approval)
        seen.append(approval)
        kid = await ctx.spawn("child", child, Signup(email="kid@x", seats=2))
        [got] = await ctx.gather(kid)
        seen.append(got)
        return venturi.complete(Receipt(email=approval.by, total=receipt.total + got.total))

    job_id = await flow.enqueue(conn, Signup(email="a@x", seats=3))
    await venturi.testing.drain(dsn, [flow, child], timers=False)
    assert await venturi.signal(conn, job_id, "approval", Approval(by="maria"))
    await venturi.testing.drain(dsn, [flow, child], timers=False)
    assert await venturi.get_result(conn, job_id) == {"email": "maria", "total": 32}
    assert runs["price"] == 1  # replayed from its record, decoded as the model
    carries = [s for s in seen if isinstance(s, Signup)]
    assert carries and all(c == Signup(email="a@x", seats=3) for c in carries)
    assert Receipt(email="a@x", total=30) in seen
    assert Approval(by="maria") in seen
    assert Receipt(email="kid@x", total=2) in seen
    assert all(type(s) in (Signup, Receipt, Approval) for s in seen)
    stored = await conn.fetchval("SELECT carry::text FROM venturi.all_jobs WHERE id = $1", job_id)
    assert msgspec.json.decode(stored) == {"email": "a@x", "seats": 3}


async def test_a_bad_model_is_refused_at_enqueue_in_one_line_and_nothing_is_written(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="pyd_signup")
    async def signup(ctx: Context[Any], carry: Signup) -> None:
        return None

    # Built without validation (or changed after): Pydantic refuses it at enqueue.
    bad = Signup.model_construct(email="a@x", seats=0)
    with pytest.raises(TypeError) as caught:
        await signup.enqueue(conn, bad)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("carry of task 'pyd_signup' must be Signup: 1 validation error")
    assert "seats: Input should be greater than 0" in message
    # Not the model at all: named as msgspec names it.
    with pytest.raises(TypeError, match="must be Signup, got dict"):
        await signup.enqueue(conn, {"email": "a@x", "seats": 1})  # type: ignore[arg-type]
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 0


async def test_models_nested_in_a_struct_and_dataclasses_and_attrs_still_work(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    got: list[Any] = []

    @venturi.task(kind="pyd_batch")
    async def batch(ctx: Context[Any], carry: Batch) -> None:
        got.append(carry)

    @venturi.task(kind="pyd_plain")
    async def plain(ctx: Context[Any], carry: Plain) -> None:
        got.append(carry)

    @venturi.task(kind="pyd_attr")
    async def attr(ctx: Context[Any], carry: Attr) -> None:
        got.append(carry)

    await batch.enqueue(conn, Batch([Signup(email="b@x", seats=1)]))
    await plain.enqueue(conn, Plain(1))
    await attr.enqueue(conn, Attr(2))
    with pytest.raises(
        TypeError,
        match=r"^carry of task .pyd_batch.: Batch.signups\[0\]: 1 validation error for Signup: seats: Input should be greater than 0$",
    ):
        await batch.enqueue(conn, Batch([Signup.model_construct(email="b@x", seats=-1)]))
    await venturi.testing.drain(dsn, [batch, plain, attr])
    assert Batch([Signup(email="b@x", seats=1)]) in got
    assert Plain(1) in got and Attr(2) in got


def test_a_recorded_value_that_no_longer_validates_is_named_in_one_line() -> None:
    from venturi.workflow.records import decode
    from venturi.workflow.suspend import Unreplayable

    with pytest.raises(Unreplayable) as caught:
        decode('{"email": "a@x", "seats": -1}', Signup, "step 'price' of job 7")
    assert str(caught.value) == (
        "step 'price' of job 7: the recorded value no longer decodes as Signup: 1 validation "
        "error for Signup: seats: Input should be greater than 0"
    )


def test_venturi_never_imports_pydantic() -> None:
    import subprocess
    import sys

    code = "import sys, venturi, venturi.testing; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
