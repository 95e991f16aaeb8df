"""A free TCP port on the loopback interface, for a server a test starts (uvicorn, a
metrics endpoint, PgBouncer, a standby): the kernel picks it, and it stays free until the
server binds it unless another process takes it first."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
