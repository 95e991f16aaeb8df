"""venturi tasks that Django code enqueues (imported by the parent test's worker too: no
Django here)."""

from __future__ import annotations

from typing import Any

import venturi
from tests.support.carries import Item


@venturi.task("dj_note")
async def note(ctx: venturi.Context[Any], carry: Item) -> venturi.Outcome:
    return venturi.complete({"noted": carry.n})
