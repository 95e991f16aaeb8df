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
- ``health``: ``KindHealth`` per kind, which ``stats``, ``top`` and the dashboard read;
- ``workers``: the registry of workers, their claims, recovering a gone one's;
- ``schedules``: the cron schedules, their last and next slots;
- ``retention``: ``purge``, retention by hand;
- ``history``: ``move_to_history``, finished jobs out of the live table by hand;
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
from venturi.admin.history import MOVE_BATCH, Moved, move_to_history
from venturi.admin.jobs import (
    JobDetail,
    JobRow,
    cancel_jobs,
    delete_job,
    delete_jobs,
    list_jobs,
    retry_jobs,
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
from venturi.admin.search import (
    COUNT_CAP,
    PERIODS,
    Bucket,
    Indexed,
    JobFilter,
    JobPage,
    Search,
    index_search,
    kind_activity,
    known_kinds,
    resolve_search,
    search_jobs,
)
from venturi.admin.waking import run_now_jobs, send_signal
from venturi.admin.workers import (
    CLAIMED_SHOWN,
    ClaimedJob,
    GoneClaims,
    RecoveredWorker,
    WorkerInfo,
    claimed_jobs,
    gone_with_claims,
    holder_of,
    list_workers,
    recover_expired,
    recover_worker,
)
from venturi.admin.workflow import (
    GRAPH_REACH_CAP,
    STEPS_SHOWN,
    WORKFLOW_COUNT_CAP,
    ChildJob,
    DependencyJob,
    GraphJob,
    RecordedStep,
    SentSignal,
    TimelineStep,
    WaitingFor,
    WaitingNow,
    WorkflowGraph,
    WorkflowView,
    workflow_graph,
    workflow_view,
)
from venturi.admin.workflow_list import (
    LIST_COUNT_CAP,
    WorkflowPage,
    WorkflowRow,
    list_workflows,
)
from venturi.status import DEFAULT_LIVENESS, FINISHED, STATUSES, JobStatus

__all__ = [
    "ACTIVITY_MINUTES",
    "BULK_BATCH",
    "CANCEL_DETAIL",
    "CLAIMED_SHOWN",
    "COUNT_CAP",
    "DEFAULT_LIVENESS",
    "FAILURES_WINDOW",
    "FINISHED",
    "GRAPH_REACH_CAP",
    "LIST_COUNT_CAP",
    "MANUAL_RETRY",
    "MOVE_BATCH",
    "PERIODS",
    "PURGE_BATCH",
    "RECENT_WINDOW",
    "RUN_NOW_DETAIL",
    "SET_PRIORITY_DETAIL",
    "STATS_COMPLETED_WINDOW",
    "STATUSES",
    "STEPS_SHOWN",
    "TOP_COMPLETED_WINDOW",
    "WORKFLOW_COUNT_CAP",
    "Bucket",
    "Change",
    "ChildJob",
    "ClaimedJob",
    "DependencyJob",
    "Fleet",
    "GoneClaims",
    "GraphJob",
    "Indexed",
    "JobDetail",
    "JobFilter",
    "JobPage",
    "JobRow",
    "JobStatus",
    "KindHealth",
    "KindNow",
    "KindState",
    "KindStats",
    "Matching",
    "Minute",
    "Moved",
    "Overview",
    "Paused",
    "PausedKind",
    "RecordedStep",
    "RecoveredWorker",
    "ScheduleView",
    "Schedules",
    "Search",
    "SentSignal",
    "Stats",
    "TimelineStep",
    "TopFrame",
    "WaitingFor",
    "WaitingNow",
    "WorkerInfo",
    "WorkflowGraph",
    "WorkflowPage",
    "WorkflowRow",
    "WorkflowView",
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
    "gone_with_claims",
    "holder_of",
    "index_search",
    "kind_activity",
    "known_kinds",
    "list_jobs",
    "list_kinds",
    "list_schedules",
    "list_workers",
    "list_workflows",
    "move_to_history",
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
    "resolve_search",
    "resume_kinds",
    "retry_jobs",
    "run_now_jobs",
    "search_jobs",
    "send_signal",
    "set_priority",
    "show_job",
    "stats",
    "top_frame",
    "workflow_graph",
    "workflow_view",
]
