"""The operator's API: what the command line (``venturi jobs ...``, ``venturi stats``,
``venturi top``, ``venturi kinds ...``, ``venturi purge``) and the dashboard do, and
what scripts may call too. One module per question:

- ``jobs``: list and show jobs; retry, cancel, delete, run now, set priority by id;
- ``bulk``: count what a filter matches, and act on exactly those jobs in batches;
- ``kinds``: pause, resume, list the kinds (paused or not) and the paused ones;
- ``health``: ``KindHealth`` per kind, which ``stats``, ``top`` and the dashboard read;
- ``workers``: the registry of workers, their claims, recovering a gone one's;
- ``schedules``: the cron schedules, their last and next slots;
- ``retention``: ``purge``, retention by hand;
- ``connection``: connecting and checking the schema for an operator's call.

Every call takes ``conn``, a ``venturi.db.conn.Conn`` (an asyncpg Connection or Pool),
and ``schema``. Nothing here is on the worker's path.
"""

from venturi.admin import connection
from venturi.admin.bulk import BULK_BATCH, Matching, act_on_matching, count_matching
from venturi.admin.common import (
    CANCEL_DETAIL,
    MANUAL_RETRY,
    RUN_NOW_DETAIL,
    SET_PRIORITY_DETAIL,
    Change,
    check_ids,
    check_status,
    operator_identity,
    parse_duration,
    parse_priority,
)
from venturi.admin.health import (
    ACTIVITY_MINUTES,
    FAILURES_WINDOW,
    RECENT_WINDOW,
    STATS_COMPLETED_WINDOW,
    TOP_COMPLETED_WINDOW,
    Fleet,
    KindHealth,
    KindNow,
    KindStats,
    Minute,
    Overview,
    Stats,
    TopFrame,
    activity,
    fleet,
    overview,
    stats,
    top_frame,
)
from venturi.admin.jobs import (
    JobDetail,
    JobRow,
    cancel_jobs,
    delete_job,
    delete_jobs,
    list_jobs,
    retry_jobs,
    run_now_jobs,
    set_priority,
    show_job,
)
from venturi.admin.kinds import (
    KindState,
    Paused,
    PausedKind,
    list_kinds,
    pause_kinds,
    paused_kinds,
    resume_kinds,
)
from venturi.admin.retention import PURGE_BATCH, purge, purge_count
from venturi.admin.schedules import Schedules, ScheduleView, list_schedules
from venturi.admin.workers import (
    CLAIMED_SHOWN,
    ClaimedJob,
    RecoveredWorker,
    WorkerInfo,
    claimed_jobs,
    list_workers,
    recover_expired,
    recover_worker,
)
from venturi.status import DEFAULT_LIVENESS, FINISHED, STATUSES, JobStatus

__all__ = [
    "ACTIVITY_MINUTES",
    "BULK_BATCH",
    "CANCEL_DETAIL",
    "CLAIMED_SHOWN",
    "DEFAULT_LIVENESS",
    "FAILURES_WINDOW",
    "FINISHED",
    "MANUAL_RETRY",
    "PURGE_BATCH",
    "RECENT_WINDOW",
    "RUN_NOW_DETAIL",
    "SET_PRIORITY_DETAIL",
    "STATS_COMPLETED_WINDOW",
    "STATUSES",
    "TOP_COMPLETED_WINDOW",
    "Change",
    "ClaimedJob",
    "Fleet",
    "JobDetail",
    "JobRow",
    "JobStatus",
    "KindHealth",
    "KindNow",
    "KindState",
    "KindStats",
    "Matching",
    "Minute",
    "Overview",
    "Paused",
    "PausedKind",
    "RecoveredWorker",
    "ScheduleView",
    "Schedules",
    "Stats",
    "TopFrame",
    "WorkerInfo",
    "act_on_matching",
    "activity",
    "cancel_jobs",
    "check_ids",
    "check_status",
    "claimed_jobs",
    "connection",
    "count_matching",
    "delete_job",
    "delete_jobs",
    "fleet",
    "list_jobs",
    "list_kinds",
    "list_schedules",
    "list_workers",
    "operator_identity",
    "overview",
    "parse_duration",
    "parse_priority",
    "pause_kinds",
    "paused_kinds",
    "purge",
    "purge_count",
    "recover_expired",
    "recover_worker",
    "resume_kinds",
    "retry_jobs",
    "run_now_jobs",
    "set_priority",
    "show_job",
    "stats",
    "top_frame",
]
