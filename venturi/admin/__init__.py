"""The operator's API: what the command line (``venturi jobs ...``, ``venturi stats``,
``venturi top``, ``venturi kinds ...``, ``venturi purge``) and the dashboard do, and
what scripts may call too. One module per question:

- ``jobs``: list and show jobs; retry, cancel, delete, run now, set priority by id;
- ``workflow``: a job's workflow side (steps, signals, children, dependencies, wait)
  that ``jobs`` shows, and the dashboard's bounded view of it and of its graph;
- ``waking``: run now (a timer woken, a signal timed out only when asked) and an
  operator's signal, journaled with who sent it;
- ``workflow_list``: the workflow roots with their progress, paged (/workflows);
- ``bulk``: count what a filter matches, and act on exactly those jobs in batches;
- ``search``: the dashboard's job list: a filter with a search box, paged both ways,
  its total, the known kinds, one kind's activity;
- ``kinds``: pause, resume, list the kinds (paused or not) and the paused ones;
- ``groups``: a kind's groups (SPEC 13), their counts and settings, why one waits;
- ``waits``: why a pending job waits on its kind (at its cap, its global cap, unserved);
- ``health``: ``KindHealth`` per kind, which ``stats``, ``top`` and the dashboard read;
- ``workers``: the registry of workers, their claims, recovering a gone one's;
- ``schedules``: the cron schedules, their last and next slots;
- ``retention``: ``purge``, retention by hand;
- ``history``: ``move_to_history``, finished jobs out of the live table by hand;
- ``connection``: connecting and checking the schema for an operator's call.

Every call takes ``conn``, a ``venturi.db.conn.Conn`` (an asyncpg Connection or Pool),
and ``schema``. Nothing here is on the worker's path.
"""

# Each module names what it exports in its own ``__all__``, beside the definitions: a
# new operator call is listed once, there (as asyncio's package does).
from venturi.admin import (
    bulk,
    common,
    connection,
    groups,
    health,
    history,
    jobs,
    kinds,
    retention,
    schedules,
    search,
    waits,
    waking,
    workers,
    workflow,
    workflow_list,
)
from venturi.admin.bulk import *  # noqa: F403
from venturi.admin.common import *  # noqa: F403
from venturi.admin.groups import *  # noqa: F403
from venturi.admin.health import *  # noqa: F403
from venturi.admin.history import *  # noqa: F403
from venturi.admin.jobs import *  # noqa: F403
from venturi.admin.kinds import *  # noqa: F403
from venturi.admin.retention import *  # noqa: F403
from venturi.admin.schedules import *  # noqa: F403
from venturi.admin.search import *  # noqa: F403
from venturi.admin.waits import *  # noqa: F403
from venturi.admin.waking import *  # noqa: F403
from venturi.admin.workers import *  # noqa: F403
from venturi.admin.workflow import *  # noqa: F403
from venturi.admin.workflow_list import *  # noqa: F403

__all__ = ["connection"]
__all__ += bulk.__all__
__all__ += common.__all__
__all__ += groups.__all__
__all__ += health.__all__
__all__ += history.__all__
__all__ += jobs.__all__
__all__ += kinds.__all__
__all__ += retention.__all__
__all__ += schedules.__all__
__all__ += search.__all__
__all__ += waits.__all__
__all__ += waking.__all__
__all__ += workers.__all__
__all__ += workflow.__all__
__all__ += workflow_list.__all__
