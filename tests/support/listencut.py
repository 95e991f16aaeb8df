"""A task module for `venturi worker tests.support.listencut`: the worker it runs has the
backend of its LISTEN connection terminated just as it says UNLISTEN on its way out, so
the UNLISTEN fails on a connection the pool has already taken back (the interleaving the
chaos soak hit twice in 213,800 jobs).

Fault injection, not a stand-in: it wraps asyncpg's ``Connection.remove_listener`` only
to place the cut at that moment, which a ``pg_terminate_backend`` from outside cannot aim
at. The cut runs on a connection of its own in a thread, blocking this process's event
loop meanwhile, so the worker learns of it only in the UNLISTEN. It prints ``listencut:
terminated the LISTEN backend <pid>`` on stderr.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

import asyncpg

import venturi
from tests.support import sql as test_sql


@venturi.task(kind="listencut_noop")
async def noop(ctx: venturi.Context[Any], carry: None) -> None:
    """Never enqueued: the worker needs a task to start."""


async def _terminate(pid: int) -> bool:
    conn = await asyncpg.connect(os.environ["VENTURI_DSN"])
    try:
        return bool(await conn.fetchval(test_sql.statement("backend_terminate_wait"), pid))
    finally:
        await conn.close()


def _terminate_blocking(pid: int) -> bool:
    done: list[bool] = []
    cut = threading.Thread(target=lambda: done.append(asyncio.run(_terminate(pid))))
    cut.start()
    cut.join()
    return done == [True]


_remove_listener = asyncpg.connection.Connection.remove_listener


async def _remove_listener_after_a_cut(
    self: asyncpg.connection.Connection, channel: str, callback: Any
) -> None:
    pid = self.get_server_pid()
    if _terminate_blocking(pid):
        print(f"listencut: terminated the LISTEN backend {pid}", file=sys.stderr, flush=True)
    await _remove_listener(self, channel, callback)


asyncpg.connection.Connection.remove_listener = _remove_listener_after_a_cut
