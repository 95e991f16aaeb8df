"""The grouped kinds of the chaos soak, run by four worker processes of their own
(``venturi worker tests.chaos.grouptasks``; docs/chaos.md, "Groups in the soak") and by
every ordinary worker of the soak (``tests.chaos.alltasks``).

Two kinds, group_cap 1 and 3 (the harness lowers some groups' caps while the soak runs,
with ``venturi.set_group``). Each run writes its entry and exit records to the ledger
(``tests/chaos/ledger.py``) around its work, its S and E lines like every chaos kind, and
a Q line to its run file if it is cancelled; ``tests/chaos/groupcheck.py`` then checks
that no group ever ran more than its cap. A tenth of their jobs have no group (one group
of their own beside the groups): they work and end as the others do, without the
ledger. A run whose carry asks for more than GROUP_OVERRUN ms works that long on its
first attempt only: past the 4 s lease, on purpose (a zombie).

The first soak with groups ran them on their own workers only, since a worker then gave
its grouped claim only the slots its ordinary claim left; now the two claims take turns
going first (docs/groups.md), and the ordinary workers run the grouped kinds beside the
soak's ungrouped backlog.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import venturi
from venturi import Context

from . import ledger
from .tasks import FAST, Chaos, _done, _end, _file, _start, _trail, _work, tag

GROUP_CAPS = {"chaos_group1": 1, "chaos_group3": 3}
GROUP_OVERRUN = 4500


def _cancelled(ctx: Context[Any]) -> None:
    _file().write(f"Q {ctx.job.id} {ctx.job.attempt} {os.getpid()} cancel {time.time():.6f}\n")


async def _grouped(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    _start(ctx)
    job, group = ctx.job, ctx.job.group
    if group is None:  # one of the kind's jobs without a group: no cap, no ledger
        if await _work(ctx, carry.ms / 1000):
            _end(ctx, "pause-cancel")
            return venturi.pause(_trail(ctx, carry, "cancel"))
        return _done(ctx)
    try:
        if not await ledger.write(job.id, job.attempt, "S", job.kind, group, ledger.ENTER_FOR):
            _end(ctx, "raise")
            raise RuntimeError(f"ledger entry not written {tag(ctx)}")
        ms = carry.ms if job.attempt == 1 or carry.ms < GROUP_OVERRUN else 100
        asked = await _work(ctx, ms / 1000)
        await ledger.write(job.id, job.attempt, "E", job.kind, group, ledger.EXIT_FOR)
    except asyncio.CancelledError:
        _cancelled(ctx)  # before the worker releases the job: no await here
        raise
    if asked:
        _end(ctx, "pause-cancel")
        return venturi.pause(_trail(ctx, carry, "cancel"))
    return _done(ctx)


@venturi.task(kind="chaos_group1", backoff=FAST, max_failures=20, group_cap=1)
async def group1(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """A grouped kind, one run per group at once: works carry.ms, writes the ledger."""
    return await _grouped(ctx, carry)


@venturi.task(kind="chaos_group3", backoff=FAST, max_failures=20, group_cap=3)
async def group3(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """A grouped kind, three runs per group at once (fewer where the harness lowered the
    group's cap): works carry.ms, writes the ledger."""
    return await _grouped(ctx, carry)


GROUP_TASKS = {"chaos_group1": group1, "chaos_group3": group3}
