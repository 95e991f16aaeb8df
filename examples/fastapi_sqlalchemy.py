"""Enqueue from a FastAPI endpoint on the SQLAlchemy ``AsyncSession`` it writes with.

``POST /orders`` stores the order and enqueues its shipping job in the session's one
transaction: ``await task.enqueue(session, carry)`` joins the transaction the session has
open (``async with session.begin():``), so both commit when the block ends and a failure
inside it leaves neither. Here the session runs on asyncpg (``postgresql+asyncpg``);
``postgresql+psycopg`` works the same.

The carry and the result are Pydantic models, as the request body is (the ``pydantic``
extra: venturi encodes them with ``model_dump`` and hands the handler the model back,
validated with ``model_validate``; a bad one is refused at enqueue, before any write).

The script drives the app with FastAPI's TestClient (no server), runs a worker in-process
(``venturi.testing.drain``), and reads the job back through the app.

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/fastapi_sqlalchemy.py
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.testclient import TestClient
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import venturi
import venturi.testing
from venturi import Context


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "example_fastapi_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str]


class OrderIn(BaseModel):
    item: str


class Ship(BaseModel):
    order_id: int
    item: str


class Shipped(BaseModel):
    shipped: int


@venturi.task("example_fastapi_ship", result=Shipped)
async def ship(ctx: Context[Any], carry: Ship) -> venturi.Outcome:
    assert isinstance(carry, Ship)  # the model, validated, not a dict
    return venturi.complete(Shipped(shipped=carry.order_id))


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session per request, from the app's sessionmaker."""
    async with request.app.state.sessions() as s:
        yield s


Db = Annotated[AsyncSession, Depends(session)]


def create_app(dsn: str) -> FastAPI:
    engine = create_async_engine(dsn.replace("postgresql://", "postgresql+asyncpg://", 1))
    # expire_on_commit=False: the endpoint answers with order.id after the commit. With
    # the default, the commit expires the order, reading order.id would load it again,
    # which an AsyncSession cannot do implicitly (MissingGreenlet): a 500 for an order
    # that was committed, and a client that retries it creates a duplicate.
    sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The app's own tables; venturi's schema is applied beforehand, by
        # `venturi schema apply` (a deploy step, like the app's migrations).
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield
        await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    app.state.sessions = sessions

    @app.post("/orders", status_code=202)
    async def create_order(body: OrderIn, db: Db) -> dict[str, int]:
        async with db.begin():
            order = Order(item=body.item)
            db.add(order)
            await db.flush()
            if body.item == "":
                # Refused after the insert: the block rolls the row back (and would
                # roll back a job enqueued before this point with it).
                raise HTTPException(422, "an order needs an item")
            carry = Ship(order_id=order.id, item=order.item)
            job_id = await ship.enqueue(db, carry, key=f"order-{order.id}")
        return {"order": order.id, "job": job_id}

    @app.get("/jobs/{job_id}")
    async def job(job_id: int, db: Db) -> dict[str, Any]:
        info = await venturi.get_job(db, job_id)
        if info is None:
            raise HTTPException(404)
        return {"status": info.status, "result": info.result}

    return app


def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    with TestClient(create_app(dsn)) as client:
        ok = client.post("/orders", json={"item": "teapot"})
        print(f"POST /orders teapot -> {ok.status_code} {ok.json()}")
        refused = client.post("/orders", json={"item": ""})
        print(f"POST /orders (no item) -> {refused.status_code}")
        ran = asyncio.run(venturi.testing.drain(dsn, [ship]))
        print(f"the worker ran {len(ran)} job(s)")
        job_id = ok.json()["job"]
        print(f"GET /jobs/{job_id} -> {client.get(f'/jobs/{job_id}').json()}")


if __name__ == "__main__":
    main()
