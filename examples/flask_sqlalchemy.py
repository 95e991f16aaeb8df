"""Enqueue from a Flask view on the SQLAlchemy session the view already writes with.

``POST /signups`` stores the user and enqueues the welcome email in the session's one
transaction: ``task.enqueue_sync(session, carry)`` joins the transaction the session has
open, so ``session.commit()`` commits the row and the job together and a rollback (an
error later in the view) leaves neither. A session with no transaction open commits the
job on its own; an ``Engine`` takes a connection and commits.

The script drives the app with Flask's test client (no server), one sign-up that
succeeds and one whose view fails after the enqueue, then runs a worker in-process
(``venturi.testing.drain``) until the email is sent.

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/flask_sqlalchemy.py
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import msgspec
import sqlalchemy as sa
from flask import Flask, abort, request
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

import venturi
import venturi.testing
from venturi import Context


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "example_flask_users"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(unique=True)


class WelcomeEmail(msgspec.Struct):
    user_id: int
    email: str


@venturi.task("example_flask_welcome")
async def send_welcome(ctx: Context[Any], carry: WelcomeEmail) -> venturi.Outcome:
    # A real service would send mail; the result records what it would have sent.
    return venturi.complete({"sent_to": carry.email})


def create_app(dsn: str) -> Flask:
    # postgresql+psycopg: SQLAlchemy on psycopg 3 (postgresql+psycopg2 works the same).
    engine = sa.create_engine(dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    Base.metadata.create_all(engine)
    sessions = sessionmaker(engine)
    app = Flask(__name__)
    app.logger.disabled = True  # the demo's failing request is on purpose

    @app.post("/signups")
    def signup() -> tuple[dict[str, Any], int]:
        body = request.get_json()
        with sessions() as session:
            user = User(email=body["email"])
            session.add(user)
            session.flush()  # the row's id; the session's transaction is now open
            job_id = send_welcome.enqueue_sync(session, WelcomeEmail(user.id, user.email))
            if body.get("fail_after_enqueue"):
                # Anything that goes wrong later in the view: closing the session
                # without a commit rolls back the user and the job together.
                abort(500)
            # Read before the commit: the commit expires the user, and once the session
            # is closed reading user.id would raise DetachedInstanceError (a 500 for a
            # sign-up that was committed).
            user_id = user.id
            session.commit()
        return {"user": user_id, "job": job_id}, 201

    @app.get("/jobs/<int:job_id>")
    def job(job_id: int) -> dict[str, Any]:
        # Reads go through the same drivers: get_job_sync on an Engine or Session.
        info = venturi.get_job_sync(engine, job_id)
        if info is None:
            abort(404)
        return {"status": info.status, "result": info.result}

    app.extensions["venturi_engine"] = engine
    return app


def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    app = create_app(dsn)
    client = app.test_client()
    alice = f"alice-{uuid.uuid4().hex[:6]}@example.test"
    ok = client.post("/signups", json={"email": alice})
    print(f"POST /signups {alice} -> {ok.status_code}")
    failed = client.post("/signups", json={"email": "bob@example.test", "fail_after_enqueue": True})
    print(f"POST /signups bob (fails after the enqueue) -> {failed.status_code}")
    engine: sa.Engine = app.extensions["venturi_engine"]
    with Session(engine) as session:
        emails = sorted(session.scalars(sa.select(User.email)))
    print(f"users: {emails}")
    ran = asyncio.run(venturi.testing.drain(dsn, [send_welcome]))
    print(f"the worker ran {len(ran)} job(s)")
    job_id = ok.get_json()["job"]
    print(f"GET /jobs/{job_id} -> {client.get(f'/jobs/{job_id}').get_json()}")
    print("the failed sign-up left neither a user nor a job")


if __name__ == "__main__":
    main()
