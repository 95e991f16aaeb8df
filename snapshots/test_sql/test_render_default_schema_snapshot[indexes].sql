-- venturi schema "venturi": indexes. Each names the statements it backs.

-- job_claim, claim_capped: an ordered scan of pending rows by (priority, rank, created_at)
-- stops at the first eligible rows; partial, so finished rows (the bulk of a busy table)
-- never enter it, nor grouped ones (migration 21: job_claim_grouped claims those, by
-- jobs_group_claim_idx, and a grouped backlog would lie in the way of every claim). Also
-- the pending jobs per kind (migration 18): with jobs_group_claim_idx, the pending counts
-- of stats, top and the gauges read it alone, by the included kind and visible_at
-- (statements/_pending.sql.j2).
CREATE INDEX IF NOT EXISTS jobs_claim_idx
    ON "venturi".jobs (priority, rank, created_at, id) INCLUDE (kind, visible_at)
    WHERE status = 'pending' AND grp IS NULL;

-- job_next_visible_at: the nearest not-yet-eligible job of the worker's kinds. Partial
-- (migration 18): only the pending jobs that became visible later than they were created
-- (scheduled, retrying, woken) enter it; a job visible from its creation is claimable at
-- once and has no wake-up time to look up, so a plain enqueue writes one index fewer.
-- Without a group (migration 23): a grouped job's wake-ups are its group's (group_wakes),
-- and a due grouped job its group holds back (paused, at its cap) is no reason to wake.
CREATE INDEX IF NOT EXISTS jobs_next_visible_idx
    ON "venturi".jobs (kind, visible_at)
    WHERE status = 'pending' AND visible_at > created_at AND grp IS NULL;

-- job_recover_stale (and the recovery inside job_claim): claims whose lease has expired.
CREATE INDEX IF NOT EXISTS jobs_stale_idx
    ON "venturi".jobs (claim_expires_at)
    WHERE status = 'claimed';

-- job_insert / job_insert_many: de-duplication by key among unfinished jobs, and the
-- ON CONFLICT arbiter.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_key_idx
    ON "venturi".jobs (kind, key)
    WHERE key IS NOT NULL AND status IN ('pending', 'claimed', 'waiting');

-- journal_get: a job's history in order.
CREATE INDEX IF NOT EXISTS journal_job_idx
    ON "venturi".journal (job_id, id);

-- job_purge_batch, job_stats, job_top: finished jobs by status and age (retention and
-- recent throughput); kind is included so per-kind counts need not visit the table.
-- Partial: pending and claimed rows, the ones the hot path touches, never enter it.
CREATE INDEX IF NOT EXISTS jobs_finished_idx
    ON "venturi".jobs (status, finished_at) INCLUDE (kind)
    WHERE finished_at IS NOT NULL;

-- job_stats, job_top: failures journaled in a recent window.
CREATE INDEX IF NOT EXISTS journal_at_idx
    ON "venturi".journal (at);

-- job_result_clear_expired: completed jobs that still hold a result, per kind and age
-- (ResultCleanup). Rows without a result, most of them, never enter it.
CREATE INDEX IF NOT EXISTS jobs_result_idx
    ON "venturi".jobs (kind, finished_at)
    WHERE status = 'completed' AND result IS NOT NULL;

-- job_list, job_ids_matching, job_count_matching filtered by kind (the dashboard's job
-- list): newest first within a kind, a rare kind included; a capped kind's pending rows
-- (job_claim_capped).
CREATE INDEX IF NOT EXISTS jobs_kind_id_idx
    ON "venturi".jobs (kind, id);

-- job_list and the bulk actions filtered by dead or cancelled. Partial: the hot path
-- (pending, claimed, completed) never enters it.
CREATE INDEX IF NOT EXISTS jobs_failed_id_idx
    ON "venturi".jobs (status, id)
    WHERE status IN ('dead', 'cancelled');

-- job_list searched by key, any status (jobs_key_idx holds unfinished jobs only).
CREATE INDEX IF NOT EXISTS jobs_key_search_idx
    ON "venturi".jobs (key, id)
    WHERE key IS NOT NULL;

-- job_search_text_* (the dashboard's search, migration 16): the indexed jobs whose words
-- hold every word of a search. A pending list of at most 1 MB: the maintenance pass's
-- inserts go there and are merged into the index in bulk as it fills (half the WAL and a
-- third less time than inserting each document into the index: benchmarks/README.md),
-- and a search scans at most that much of it.
CREATE INDEX IF NOT EXISTS job_search_doc_idx
    ON "venturi".job_search USING gin (doc) WITH (fastupdate = on, gin_pending_list_limit = 1024);

-- workflow_settled: the dependents of a job that ended.
CREATE INDEX IF NOT EXISTS dependencies_depends_on_idx
    ON "venturi".dependencies (depends_on);

-- workflow_settled (a cancel's cascade), jobs show: a job's children. Partial: plain
-- jobs never enter it.
CREATE INDEX IF NOT EXISTS jobs_parent_idx
    ON "venturi".jobs (parent_id)
    WHERE parent_id IS NOT NULL;

-- job_next_visible_at and job_wake_due: the waiting jobs' timers per kind. Partial: only
-- waiting jobs with a timer enter it, never the claim's rows.
CREATE INDEX IF NOT EXISTS jobs_wake_idx
    ON "venturi".jobs (kind, wake_at)
    WHERE status = 'waiting' AND wake_at IS NOT NULL;

-- job_stats, job_top, job_overview, queue_gauges: the waiting jobs per kind (any wait: a
-- timer, a signal, children, dependencies). Partial: the claim's rows never enter it,
-- and jobs_claim_idx never holds a waiting job.
CREATE INDEX IF NOT EXISTS jobs_waiting_idx
    ON "venturi".jobs (kind)
    WHERE status = 'waiting';

-- jobs_history (migration 17): the indexes the reads of finished jobs use, each the
-- counterpart of one on jobs (the statements that use them are named there), so a read
-- through all_jobs takes the same path in both tables.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_history_pkey
    ON "venturi".jobs_history (id);

CREATE INDEX IF NOT EXISTS jobs_history_finished_idx
    ON "venturi".jobs_history (status, finished_at) INCLUDE (kind);

CREATE INDEX IF NOT EXISTS jobs_history_result_idx
    ON "venturi".jobs_history (kind, finished_at)
    WHERE status = 'completed' AND result IS NOT NULL;

CREATE INDEX IF NOT EXISTS jobs_history_kind_id_idx
    ON "venturi".jobs_history (kind, id);

CREATE INDEX IF NOT EXISTS jobs_history_failed_id_idx
    ON "venturi".jobs_history (status, id)
    WHERE status IN ('dead', 'cancelled');

CREATE INDEX IF NOT EXISTS jobs_history_key_search_idx
    ON "venturi".jobs_history (key, id)
    WHERE key IS NOT NULL;

CREATE INDEX IF NOT EXISTS jobs_history_parent_idx
    ON "venturi".jobs_history (parent_id)
    WHERE parent_id IS NOT NULL;

-- job_claim_grouped: a group's pending jobs in claim order (the tier, rank, age). Only
-- grouped rows enter it; with jobs_claim_idx (the others), every pending job, whose
-- counts per kind read both indexes alone by the included visible_at (migration 21).
CREATE INDEX IF NOT EXISTS jobs_group_claim_idx
    ON "venturi".jobs (kind, grp, priority, rank, created_at, id) INCLUDE (visible_at)
    WHERE status = 'pending' AND grp IS NOT NULL;

-- job_claim_grouped: a group's claimed jobs, counted against its cap (at most the cap,
-- plus a dead worker's claims until they are recovered).
CREATE INDEX IF NOT EXISTS jobs_group_claimed_idx
    ON "venturi".jobs (kind, grp)
    WHERE status = 'claimed' AND grp IS NOT NULL;

-- job_list --group: a group's jobs, newest first.
CREATE INDEX IF NOT EXISTS jobs_grp_id_idx
    ON "venturi".jobs (grp, id)
    WHERE grp IS NOT NULL;

-- job_claim_grouped: the ready groups of a kind, by tier then virtual time. Idle groups
-- (ready = false) never enter it.
CREATE INDEX IF NOT EXISTS groups_ready_idx
    ON "venturi".groups (kind, head, vtime)
    WHERE ready;

-- job_claim_grouped: the due wake-ups of a kind; group_wake_row's look-up of its own.
CREATE INDEX IF NOT EXISTS group_wakes_due_idx
    ON "venturi".group_wakes (kind, at, grp);

-- group_refill_advance: the token wake-ups of a kind made at a slower rate than a worker's
-- (group_wakes.rate, migration 25). Included by schema/_group_indexes.sql.j2 and by
-- migration 25.
CREATE INDEX IF NOT EXISTS group_wakes_rate_idx
    ON "venturi".group_wakes (kind, rate)
    WHERE rate IS NOT NULL;

-- job_claim_grouped: the greatest virtual time of a kind's groups, where a waking group
-- starts when no group of the kind is ready (no banked credit): then every group of the
-- kind is idle, so the idle ones are enough. Partial, so that a claim's write of a
-- ready group's row (its virtual time moves) adds no entry here: one index fewer per
-- group a claim takes from.
CREATE INDEX IF NOT EXISTS groups_vtime_idx
    ON "venturi".groups (kind, vtime)
    WHERE NOT ready;

-- job_list --group over the history (all_jobs): a group's finished jobs, newest first.
CREATE INDEX IF NOT EXISTS jobs_history_grp_id_idx
    ON "venturi".jobs_history (grp, id)
    WHERE grp IS NOT NULL;

-- group_list, group_list_by_claimed: the groups an operator gave a setting (a cap, a
-- weight, a pause), always on the page's candidates: a few rows, where a scan of every
-- group of the kind read 100,000 (migration 20).
CREATE INDEX IF NOT EXISTS groups_set_idx
    ON "venturi".groups (kind, grp)
    WHERE cap IS NOT NULL OR weight IS NOT NULL OR paused;
