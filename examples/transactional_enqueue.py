"""Transactional enqueue: a job commits or rolls back together with your own rows.

A sign-up writes a user and enqueues the welcome email in one transaction. When the
sign-up fails after the enqueue, the rollback takes the job with it: no email for a user
who does not exist. When it commits, the job is there for a worker, even if the process
dies the instant after the commit. There is no broker to keep in step with the database.

Run it against a database with the venturi schema applied:

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/transactional_enqueue.py
"""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass, field

import asyncpg
import msgspec

import venturi
from venturi import Context


class Welcome(msgspec.Struct):
    """The job's carry: everything the email needs, persisted with the job."""

    user_id: int
    email: str


@dataclass
class Mailer:
    """The worker's shared state (``ctx.state``): here an outbox instead of SMTP."""

    sent: list[str] = field(default_factory=list)


@venturi.task(kind="example_welcome_email")
async def send_welcome(ctx: Context[Mailer], carry: Welcome) -> venturi.Outcome:
    ctx.state.sent.append(carry.email)
    return venturi.complete({"sent_to": carry.email})


class PaymentDeclined(Exception):
    pass


async def sign_up(conn: asyncpg.Connection, email: str, *, card_ok: bool = True) -> int:
    """Create the user and enqueue the welcome email, all or nothing."""
    async with conn.transaction():
        user_id: int = await conn.fetchval(
            "INSERT INTO example_users (email) VALUES ($1) RETURNING id", email
        )
        # The job row is written by this connection, inside this transaction.
        await send_welcome.enqueue(conn, Welcome(user_id, email), key=f"welcome:{user_id}")
        if not card_ok:
            raise PaymentDeclined(email)  # rolls back the user and the job
    return user_id


async def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    run = uuid.uuid4().hex[:6]  # the example can run again on the same database
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS example_users ("
            " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text UNIQUE NOT NULL)"
        )
        alice = f"alice-{run}@example.test"
        bob = f"bob-{run}@example.test"
        alice_id = await sign_up(conn, alice)
        print(f"signed up {alice} (user {alice_id}): committed with its welcome job")
        try:
            await sign_up(conn, bob, card_ok=False)
        except PaymentDeclined:
            print(f"sign-up of {bob} failed after the enqueue: rolled back")
        bob_rows = await conn.fetchval("SELECT count(*) FROM example_users WHERE email = $1", bob)
        print(f"users named {bob}: {bob_rows}")

        # A worker (usually another process: `venturi worker myapp.jobs`) sends the email.
        mailer = Mailer()
        worker = venturi.Worker(mailer, dsn, [send_welcome], concurrency=2, poll_max=1.0)
        shutdown = asyncio.Event()
        running = asyncio.create_task(worker.run(shutdown))
        while alice not in mailer.sent:
            if running.done():
                running.result()  # the worker stopped early: raise its error
            await asyncio.sleep(0.05)
        shutdown.set()
        await running

        print(f"emails sent: {sorted(e for e in mailer.sent if e.endswith(run + '@example.test'))}")
        assert alice in mailer.sent and bob not in mailer.sent
        print("ok: one user, one email; the failed sign-up left neither")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
