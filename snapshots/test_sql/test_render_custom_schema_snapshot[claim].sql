-- Runtime statements, as PREPAREd by the worker. Parameters are $n binds.

-- alert_claim_if_due: take the right to deliver alert $1 now: a row when this worker is to
-- deliver it, none when another worker did (or is doing) so within its cooldown or retry
-- delay. The claim holds it for $2 seconds: a failed delivery is retried after that, by
-- whichever worker sees the condition first.
-- $1 text key: the alert's name and kind
-- $2 float8 hold: seconds before the alert may be delivered again if this delivery fails
-- index: alert_state primary key (the ON CONFLICT arbiter). A concurrent claim waits for
-- the row lock and then finds next_at in the future.
PREPARE billing_jobs_alert_claim_if_due(text, float8) AS
INSERT INTO "billing_jobs".alert_state AS a (key, next_at)
VALUES ($1::text, now() + make_interval(secs => $2::float8))
ON CONFLICT (key) DO UPDATE
    SET next_at = excluded.next_at
    WHERE a.next_at <= now()
RETURNING a.key;

-- alert_delivered: record that alert $1 reached a target; it stays quiet for $2 seconds.
-- $1 text key: the alert's name and kind
-- $2 float8 cooldown: seconds before it may be delivered again
-- index: alert_state primary key.
PREPARE billing_jobs_alert_delivered(text, float8) AS
UPDATE "billing_jobs".alert_state
SET next_at = now() + make_interval(secs => $2::float8),
    last_sent_at = now(),
    last_error = NULL,
    sent = sent + 1
WHERE key = $1::text;

-- alert_failed: record why alert $1 reached no target; next_at, set by the claim, already
-- holds the retry delay.
-- $1 text key: the alert's name and kind
-- $2 text error: what went wrong, one line
-- index: alert_state primary key.
PREPARE billing_jobs_alert_failed(text, text) AS
UPDATE "billing_jobs".alert_state
SET last_error = $2::text
WHERE key = $1::text;

-- alert_metrics: per kind, what the alert thresholds look at: due pending jobs and how
-- long the oldest has been claimable, and completions and failed executions in the last
-- $1 seconds. Kinds with none of these do not appear.
-- $1 float8 window: seconds of the error-rate window
-- $2 text manual_detail: the journal detail of an operator's retry, not a failure
-- index: jobs_claim_idx and jobs_group_claim_idx (pending, kind and visible_at included), jobs_finished_idx (completed, by finished_at,
-- kind included), journal_at_idx (failures).
PREPARE billing_jobs_alert_metrics(float8, text) AS
WITH pending AS (
    SELECT kind,
           count(*) AS due,
           -- How long the longest-waiting due job has been claimable: a job scheduled
           -- for later is not late before its time.
           extract(epoch FROM now() - min(visible_at))::float8 AS oldest_due_seconds
    FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS p
    WHERE visible_at <= now()
    GROUP BY kind
),
completed AS (
    SELECT kind, count(*) AS completed
    FROM "billing_jobs".all_jobs
    WHERE status = 'completed'
      AND finished_at >= now() - make_interval(secs => $1::float8)
    GROUP BY kind
),
failures AS (
    -- The failed executions `venturi stats` counts: an exception, a retry outcome, a
    -- timeout, a lost claim; not an operator's manual retry.
    SELECT j.kind, count(*) AS failures
    FROM "billing_jobs".journal l
    JOIN "billing_jobs".all_jobs j ON j.id = l.job_id
    WHERE l.at >= now() - make_interval(secs => $1::float8)
      AND l.event IN ('failed', 'retried', 'timed-out', 'stale-recovered')
      AND l.detail IS DISTINCT FROM $2::text
    GROUP BY j.kind
),
kinds AS (
    SELECT kind FROM pending UNION SELECT kind FROM completed UNION SELECT kind FROM failures
)
SELECT k.kind,
       coalesce(p.due, 0) AS due,
       coalesce(p.oldest_due_seconds, 0)::float8 AS oldest_due_seconds,
       coalesce(c.completed, 0) AS completed,
       coalesce(f.failures, 0) AS failures
FROM kinds k
LEFT JOIN pending p ON p.kind = k.kind
LEFT JOIN completed c ON c.kind = k.kind
LEFT JOIN failures f ON f.kind = k.kind
ORDER BY k.kind;

-- child_list: the status, result and error of some jobs (a parent's children), in the
-- given order, with the parent's wake_seq, in one snapshot: a gather that finds children
-- unfinished waits only if none ended after this read (job_wait_if_owned). A missing
-- child (deleted) has a NULL status.
-- $1 bigint job_id: the parent
-- $2 bigint[] ids: its children
-- index: primary key.
PREPARE billing_jobs_child_list(bigint, bigint[]) AS
SELECT (SELECT coalesce(p.wake_seq, 0) FROM "billing_jobs".all_jobs p WHERE p.id = $1::bigint) AS wake_seq,
       c.n, c.id, j.kind, j.status, j.result::text AS result, j.last_error
FROM unnest($2::bigint[]) WITH ORDINALITY AS c(id, n)
LEFT JOIN "billing_jobs".all_jobs j ON j.id = c.id
ORDER BY c.n;

-- child_spawn: ctx.spawn: enqueue a child job and record its id as the parent's step, in
-- one statement, so a crash can never leave one without the other. The id is drawn
-- first and recorded; the child is inserted only if this statement's record won. A
-- second run (after a crash) finds the record and inserts nothing: a child is spawned
-- once. With a key held by an unfinished job the child is not inserted (spawned false,
-- holder: that job) and the caller rolls its transaction back.
-- $1 bigint parent_id: the spawning job
-- $2 text name: the step's name
-- $3 text kind: the child's kind
-- $4 text carry: the child's carry, msgspec-encoded JSON
-- $5 smallint priority: the child's priority
-- $6 integer max_failures: the child task's failure backstop
-- $7 float8 backoff_base: the child task's declared backoff (NULL: none), first delay
-- $8 float8 backoff_factor: its growth per failure
-- $9 float8 backoff_cap: its ceiling in seconds
-- $10 boolean backoff_jitter: whether it is half-jittered
-- $11 text key: the child's de-duplication key (NULL: none)
-- $12 text traceparent: the W3C trace context of the parent's run (NULL: none)
-- $13 text grp: the child's group (NULL: the parent's; SPEC 13)
-- index: primary key of steps; jobs_key_idx for the key.
PREPARE billing_jobs_child_spawn(bigint, text, text, text, smallint, integer, float8, float8, float8, boolean, text, text, text) AS
WITH drawn AS (
    SELECT nextval(pg_get_serial_sequence('"billing_jobs".jobs', 'id')) AS id
),
recorded AS (
    INSERT INTO "billing_jobs".steps AS st (job_id, name, value)
    SELECT $1::bigint, $2::text, to_jsonb(drawn.id) FROM drawn
    ON CONFLICT (job_id, name) DO UPDATE SET job_id = st.job_id
    RETURNING (st.value #>> '{}')::bigint AS id, st.xmax = 0 AS inserted
),
child AS (
    INSERT INTO "billing_jobs".jobs (id, kind, carry, priority, max_failures, backoff_base,
                              backoff_factor, backoff_cap, backoff_jitter, key, parent_id,
                              linked, traceparent, grp)
    SELECT r.id, $3::text, $4::jsonb, $5::smallint, $6::integer, $7::float8, $8::float8,
           $9::float8, $10::boolean, $11::text, $1::bigint, true, $12::text,
           coalesce($13::text, (SELECT p.grp FROM "billing_jobs".jobs p WHERE p.id = $1::bigint))
    FROM recorded r
    WHERE r.inserted
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed', 'waiting')
        DO NOTHING
    RETURNING id
),
parent AS (
    -- Its end must now be looked at (a cancel cascades to the children).
    UPDATE "billing_jobs".jobs SET linked = true
    WHERE id = $1::bigint AND linked IS NOT TRUE AND EXISTS (SELECT 1 FROM child)
)
SELECT r.id, r.inserted, EXISTS (SELECT 1 FROM child) AS spawned,
       (SELECT h.id FROM "billing_jobs".jobs h
        WHERE $11::text IS NOT NULL AND h.kind = $3::text AND h.key = $11::text
          AND h.status IN ('pending', 'claimed', 'waiting')
        LIMIT 1) AS holder
FROM recorded r;

-- child_spawn_many: a run's unkeyed spawns (ctx.spawn), written together at the run's
-- next workflow statement or its end: each child inserted and its id recorded as the
-- parent's step, in one statement, so a crash leaves neither or both (as child_spawn
-- does for a keyed one). The ids were drawn beforehand (job_ids_draw). A name another
-- run recorded first keeps that run's id and inserts no child: ``id`` is the recorded
-- one, ``inserted`` false. One commit, and one NOTIFY for the workers, per batch.
-- $1 bigint parent_id: the spawning job
-- $2 text[] names: the steps' names
-- $3 bigint[] ids: the children's drawn ids
-- $4 text[] kinds: the children's kinds
-- $5 text[] carries: their carries, msgspec-encoded JSON
-- $6 smallint[] priorities: their priorities
-- $7 integer[] max_failures: their tasks' failure backstops
-- $8 float8[] backoff_base: their tasks' declared backoff (NULL: none), first delay
-- $9 float8[] backoff_factor: its growth per failure
-- $10 float8[] backoff_cap: its ceiling in seconds
-- $11 boolean[] backoff_jitter: whether it is half-jittered
-- $12 text[] traceparents: the W3C trace context of each spawn (NULL: none)
-- $13 text[] grps: each child's group (NULL: the parent's; SPEC 13)
-- index: primary key of steps; primary key of jobs for the parent.
PREPARE billing_jobs_child_spawn_many(bigint, text[], bigint[], text[], text[], smallint[], integer[], float8[], float8[], float8[], boolean[], text[], text[]) AS
WITH wanted AS (
    SELECT *
    FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::smallint[],
                $7::integer[], $8::float8[], $9::float8[], $10::float8[], $11::boolean[],
                $12::text[], $13::text[])
        AS w(name, id, kind, carry, priority, max_failures, backoff_base, backoff_factor,
             backoff_cap, backoff_jitter, traceparent, grp)
),
recorded AS (
    INSERT INTO "billing_jobs".steps AS st (job_id, name, value)
    SELECT $1::bigint, w.name, to_jsonb(w.id) FROM wanted w
    ON CONFLICT (job_id, name) DO UPDATE SET job_id = st.job_id
    RETURNING st.name, (st.value #>> '{}')::bigint AS id, st.xmax = 0 AS inserted
),
child AS (
    INSERT INTO "billing_jobs".jobs (id, kind, carry, priority, max_failures, backoff_base,
                              backoff_factor, backoff_cap, backoff_jitter, parent_id, linked,
                              traceparent, grp)
    SELECT w.id, w.kind, w.carry::jsonb, w.priority, w.max_failures, w.backoff_base,
           w.backoff_factor, w.backoff_cap, w.backoff_jitter, $1::bigint, true, w.traceparent,
           coalesce(w.grp, (SELECT p.grp FROM "billing_jobs".jobs p WHERE p.id = $1::bigint))
    FROM wanted w
    JOIN recorded r ON r.name = w.name AND r.inserted
    ORDER BY w.id
    RETURNING id
),
parent AS (
    -- Its end must now be looked at (a cancel cascades to the children).
    UPDATE "billing_jobs".jobs SET linked = true
    WHERE id = $1::bigint AND linked IS NOT TRUE AND EXISTS (SELECT 1 FROM child)
)
SELECT r.name, r.id, r.inserted FROM recorded r;

-- connection_probe: touches nothing; answers only if the connection still reaches a live
-- server (the LISTEN connection's health check).
PREPARE billing_jobs_connection_probe AS
SELECT 1 AS alive;

-- dependency_result: ctx.result_of: the job a Workflow node comes after, by its node
-- name, with its kind, status and result (NULL id: no such dependency).
-- $1 bigint job_id: the dependent job
-- $2 text name: the dependency's node name
-- index: primary keys of dependencies and jobs.
PREPARE billing_jobs_dependency_result(bigint, text) AS
SELECT d.depends_on AS id, j.kind, j.status, j.result::text AS result
FROM "billing_jobs".dependencies d
LEFT JOIN "billing_jobs".all_jobs j ON j.id = d.depends_on
WHERE d.job_id = $1::bigint AND d.name = $2::text;

-- group_gauges: the groups' gauges of `venturi metrics` (and QueueGauges), one statement
-- per read: per kind, how many groups have pending or claimed jobs (on every row of the
-- kind), and the groups with the most pending jobs (then the most claimed), at most $1
-- per kind, each with its pending and claimed jobs. Bounded series: a group outside a
-- kind's top $1 has no row, so its gauges go at the next read.
-- $1 integer top: most groups listed per kind
-- index: jobs_group_claim_idx (pending) and jobs_group_claimed_idx (claimed), read
-- index-only (a sequential scan when most jobs are grouped): the read costs the grouped
-- jobs pending or claimed, as queue_gauges costs the pending ones, and a top-N sort per
-- kind (100,000 groups of one pending job each: 0.9 s on a loaded 2-core machine, where
-- a window over every group took 2.3 s).
PREPARE billing_jobs_group_gauges(integer) AS
WITH pending AS (
    SELECT j.kind, j.grp, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'pending' AND j.grp IS NOT NULL
    GROUP BY j.kind, j.grp
),
held AS (
    SELECT j.kind, j.grp, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'claimed' AND j.grp IS NOT NULL
    GROUP BY j.kind, j.grp
),
busy AS (
    SELECT coalesce(p.kind, h.kind) AS kind, coalesce(p.grp, h.grp) AS grp,
           coalesce(p.n, 0) AS pending, coalesce(h.n, 0) AS claimed
    FROM pending p
    FULL JOIN held h ON h.kind = p.kind AND h.grp = p.grp
),
counted AS (
    SELECT b.kind, count(*)::integer AS groups FROM busy b GROUP BY b.kind
)
-- Per kind, its top groups by a top-N sort of its busy groups (a LATERAL with a LIMIT):
-- no sort of every group, which a window over them all would need.
SELECT c.kind, c.groups, t.grp, t.pending, t.claimed
FROM counted c
CROSS JOIN LATERAL (
    SELECT b.grp, b.pending, b.claimed
    FROM busy b
    WHERE b.kind = c.kind
    ORDER BY b.pending DESC, b.claimed DESC, b.grp
    LIMIT $1::integer
) AS t
ORDER BY c.kind, t.pending DESC, t.claimed DESC, t.grp;

-- group_get: one group of a kind with its counts (venturi groups show, why a pending job
-- of the group waits); no row for a group with neither a job nor a setting. A group
-- whose jobs no claim has looked at yet has no row in groups: the default settings.
-- $1 text kind: the kind
-- $2 text grp: the group
-- $3 float8 liveness: seconds without a heartbeat after which a worker is gone
-- index: groups primary key; jobs_group_claim_idx and jobs_group_claimed_idx; workers
-- primary key (the holders of the group's claims).
PREPARE billing_jobs_group_get(text, text, float8) AS
WITH counts AS (
    SELECT (SELECT count(*)::integer FROM "billing_jobs".jobs j
            WHERE j.status = 'pending' AND j.kind = $1::text AND j.grp = $2::text) AS pending,
           (SELECT count(*)::integer FROM "billing_jobs".jobs j
            WHERE j.status = 'claimed' AND j.kind = $1::text AND j.grp = $2::text) AS claimed
),
-- The group's claims that no running handler may settle: past their lease (the next
-- stale sweep frees them), or held by a worker gone or stopped (its lease runs on, up
-- to its whole length; `venturi recover --worker` frees them at once). A group at its
-- cap because of them is not busy: operators are told who holds it.
held AS (
    SELECT j.claim_expires_at < now() AS expired, w.id::text AS worker, j.claimed_at
    FROM "billing_jobs".jobs j
    LEFT JOIN "billing_jobs".workers w ON w.id = j.claim_token
    WHERE j.status = 'claimed' AND j.kind = $1::text AND j.grp = $2::text
      AND (j.claim_expires_at < now() OR w.stopped_at IS NOT NULL
           OR w.heartbeat_at < now() - make_interval(secs => $3::float8))
),
stale AS (
    SELECT count(*) FILTER (WHERE h.expired)::integer AS expired,
           count(*) FILTER (WHERE NOT h.expired)::integer AS gone,
           -- Each holder once, the one holding longest first: every one must be recovered.
           array(SELECT g.worker FROM held g WHERE NOT g.expired
                 GROUP BY g.worker ORDER BY min(g.claimed_at), g.worker) AS gone_workers
    FROM held h
)
SELECT $2::text AS grp, c.pending, c.claimed, g.cap, g.task_cap, g.weight,
       coalesce(g.paused, false) AS paused, coalesce(g.ready, false) AS ready,
       -- The bucket holds no whole token yet (token_at: at the last claim's rate).
       coalesce(g.token_at > now(), false) AS out_of_tokens,
       coalesce(CASE WHEN g.minute = date_trunc('minute', now()) THEN g.minute_claims
                     + g.last_minute_claims
                       * (1 - extract(epoch FROM now() - date_trunc('minute', now())) / 60)
                     WHEN g.minute = date_trunc('minute', now()) - interval '1 minute'
                     THEN g.minute_claims
                       * (1 - extract(epoch FROM now() - date_trunc('minute', now())) / 60)
                END, 0)::integer AS recent,
       t.expired, t.gone, t.gone_workers
FROM counts c CROSS JOIN stale t
LEFT JOIN "billing_jobs".groups g ON g.kind = $1::text AND g.grp = $2::text
WHERE g.grp IS NOT NULL OR c.pending > 0 OR c.claimed > 0;

-- group_kinds: which of these kinds have groups (SPEC 13), so that a worker claims their
-- grouped jobs with job_claim_grouped. A kind needs no declaration to have groups: an
-- idle worker learns of them from job_next_visible_at, and a busy one, whose claims keep
-- every slot filled so that it never looks up what to wait for, asks this about its other
-- kinds about once a second, beside the loop (runtime/claimer.py, look_for_groups): a grouped
-- job of such a kind waited for the worker's whole backlog to drain without it.
-- $1 text[] kinds: the worker's kinds not yet known to have groups
-- index: the groups primary key and group_wakes_due_idx, a probe or two per kind.
PREPARE billing_jobs_group_kinds(text[]) AS
SELECT ARRAY(SELECT g.kind FROM unnest($1::text[]) AS g(kind)
      WHERE EXISTS (SELECT 1 FROM "billing_jobs".groups r WHERE r.kind = g.kind)
         OR EXISTS (SELECT 1 FROM "billing_jobs".group_wakes w WHERE w.kind = g.kind)) AS kinds;

-- group_list: a kind's groups with work or settings (venturi groups list, the dashboard's
-- kind page), most pending first, a page at a time; with $2, the groups whose name holds
-- it. A group whose jobs no claim has looked at yet has no row in groups: it is listed
-- from its jobs, with the default settings. "recent" counts this minute's claims and the
-- part of the previous minute's that falls within the last 60 seconds, pro rata.
-- $1 text kind: the kind
-- $2 text search: a substring of the group's name, in any case (NULL: every group)
-- $3 integer page_size: most groups to return
-- $4 integer page_offset: groups to skip
-- index: jobs_group_claim_idx and jobs_group_claimed_idx, read index-only, for the
-- counts; groups_set_idx for the groups with a setting; groups primary key.
PREPARE billing_jobs_group_list(text, text, integer, integer) AS
WITH top AS (
    SELECT j.grp, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'pending' AND j.kind = $1::text AND j.grp IS NOT NULL
      AND ($2::text IS NULL OR strpos(lower(j.grp), lower($2::text)) > 0)
    GROUP BY j.grp
    ORDER BY n DESC, j.grp
    LIMIT $3::integer + $4::integer
),
held AS (
    SELECT j.grp, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'claimed' AND j.kind = $1::text AND j.grp IS NOT NULL
    GROUP BY j.grp
),
-- The page is one of: the groups most pending (ties by name), any group with a claimed
-- job, any group with a setting; only those few are counted and sorted, not every group.
-- In either order: a group without claimed jobs ranks by pending then name in both.
-- Their counts are gathered by one aggregate, not joined nor looked up per candidate:
-- a look-up of a CTE is a scan of it, and a join with one is planned from a guess of its
-- size (a nested loop when it guesses one row), so a deep page (--offset 10,000 at
-- 100,000 groups: 4.9 s) or a long one (--limit 100,000: 530 s) cost its size squared.
tallies AS (
    SELECT t.grp, t.n AS pending, NULL::integer AS claimed FROM top t
    UNION ALL
    SELECT h.grp, NULL, h.n FROM held h
    UNION ALL
    SELECT g.grp, NULL, NULL FROM "billing_jobs".groups g
    WHERE g.kind = $1::text AND (g.cap IS NOT NULL OR g.weight IS NOT NULL OR g.paused)
),
counted AS (
    SELECT k.grp,
           -- Outside the top, a candidate counts its own (COALESCE stops at the first
           -- value that is not NULL: a top group is not counted twice).
           coalesce(max(k.pending),
                    (SELECT count(*)::integer FROM "billing_jobs".jobs j
                     WHERE j.status = 'pending' AND j.kind = $1::text AND j.grp = k.grp))
             AS pending,
           coalesce(max(k.claimed), 0) AS claimed
    FROM tallies k
    WHERE $2::text IS NULL OR strpos(lower(k.grp), lower($2::text)) > 0
    GROUP BY k.grp
),
-- The page, before the groups' rows are read: only its groups are joined with them.
page AS (
    SELECT c.* FROM counted c
    ORDER BY c.pending DESC, c.claimed DESC, c.grp
    LIMIT $3::integer OFFSET $4::integer
)
SELECT c.grp, c.pending, c.claimed, g.cap, g.task_cap,
       g.weight, coalesce(g.paused, false) AS paused, coalesce(g.ready, false) AS ready,
       coalesce(g.token_at > now(), false) AS out_of_tokens,
       coalesce(CASE WHEN g.minute = date_trunc('minute', now()) THEN g.minute_claims
                     + g.last_minute_claims
                       * (1 - extract(epoch FROM now() - date_trunc('minute', now())) / 60)
                     WHEN g.minute = date_trunc('minute', now()) - interval '1 minute'
                     THEN g.minute_claims
                       * (1 - extract(epoch FROM now() - date_trunc('minute', now())) / 60)
                END, 0)::integer AS recent
FROM page c
LEFT JOIN "billing_jobs".groups g ON g.kind = $1::text AND g.grp = c.grp
ORDER BY c.pending DESC, c.claimed DESC, c.grp;

-- group_list_by_claimed: a kind's groups as group_list gives them, most claimed first
-- (then most pending): the dashboard's kind page, "top by claimed", shows which groups
-- hold the kind's slots now.
-- $1 text kind: the kind
-- $2 text search: a substring of the group's name, in any case (NULL: every group)
-- $3 integer page_size: most groups to return
-- $4 integer page_offset: groups to skip
-- index: as group_list (jobs_group_claim_idx and jobs_group_claimed_idx, index-only;
-- groups_set_idx; groups primary key).
PREPARE billing_jobs_group_list_by_claimed(text, text, integer, integer) AS
WITH top AS (
    SELECT j.grp, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'pending' AND j.kind = $1::text AND j.grp IS NOT NULL
      AND ($2::text IS NULL OR strpos(lower(j.grp), lower($2::text)) > 0)
    GROUP BY j.grp
    ORDER BY n DESC, j.grp
    LIMIT $3::integer + $4::integer
),
held AS (
    SELECT j.grp, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'claimed' AND j.kind = $1::text AND j.grp IS NOT NULL
    GROUP BY j.grp
),
-- The page is one of: the groups most pending (ties by name), any group with a claimed
-- job, any group with a setting; only those few are counted and sorted, not every group.
-- In either order: a group without claimed jobs ranks by pending then name in both.
-- Their counts are gathered by one aggregate, not joined nor looked up per candidate:
-- a look-up of a CTE is a scan of it, and a join with one is planned from a guess of its
-- size (a nested loop when it guesses one row), so a deep page (--offset 10,000 at
-- 100,000 groups: 4.9 s) or a long one (--limit 100,000: 530 s) cost its size squared.
tallies AS (
    SELECT t.grp, t.n AS pending, NULL::integer AS claimed FROM top t
    UNION ALL
    SELECT h.grp, NULL, h.n FROM held h
    UNION ALL
    SELECT g.grp, NULL, NULL FROM "billing_jobs".groups g
    WHERE g.kind = $1::text AND (g.cap IS NOT NULL OR g.weight IS NOT NULL OR g.paused)
),
counted AS (
    SELECT k.grp,
           -- Outside the top, a candidate counts its own (COALESCE stops at the first
           -- value that is not NULL: a top group is not counted twice).
           coalesce(max(k.pending),
                    (SELECT count(*)::integer FROM "billing_jobs".jobs j
                     WHERE j.status = 'pending' AND j.kind = $1::text AND j.grp = k.grp))
             AS pending,
           coalesce(max(k.claimed), 0) AS claimed
    FROM tallies k
    WHERE $2::text IS NULL OR strpos(lower(k.grp), lower($2::text)) > 0
    GROUP BY k.grp
),
-- The page, before the groups' rows are read: only its groups are joined with them.
page AS (
    SELECT c.* FROM counted c
    ORDER BY c.claimed DESC, c.pending DESC, c.grp
    LIMIT $3::integer OFFSET $4::integer
)
SELECT c.grp, c.pending, c.claimed, g.cap, g.task_cap,
       g.weight, coalesce(g.paused, false) AS paused, coalesce(g.ready, false) AS ready,
       coalesce(g.token_at > now(), false) AS out_of_tokens,
       coalesce(CASE WHEN g.minute = date_trunc('minute', now()) THEN g.minute_claims
                     + g.last_minute_claims
                       * (1 - extract(epoch FROM now() - date_trunc('minute', now())) / 60)
                     WHEN g.minute = date_trunc('minute', now()) - interval '1 minute'
                     THEN g.minute_claims
                       * (1 - extract(epoch FROM now() - date_trunc('minute', now())) / 60)
                END, 0)::integer AS recent
FROM page c
LEFT JOIN "billing_jobs".groups g ON g.kind = $1::text AND g.grp = c.grp
ORDER BY c.claimed DESC, c.pending DESC, c.grp;

-- group_refill_advance: move forward the token wake-ups of a worker's grouped kinds that
-- were made at a slower group_rate than the worker's, or under a rate its task no longer
-- declares (SPEC 13; migration 25).
-- A group out of tokens is parked with a wake-up at the time its next token is due, at
-- the rate of the claim that parked it (job_claim_grouped's `refill`, which keeps that
-- rate in the row). Without this, a deploy that raised a kind's group_rate, or removed
-- it, left those groups parked until the old rate's time (an hour, at one token an hour),
-- though the new rate had given them a token long before. Each wake-up found moves to
-- when this worker's rate gives its group the next token (now, without a rate), never
-- later than it was, and takes this worker's rate, so it is not found again. One that
-- comes before the group's token is due costs one claim, which parks the group again
-- with a wake-up at that claim's rate. Under a rolling deploy, a worker of the old rate
-- may park a group again at its rate; the next look of a new worker moves it again.
-- $1 text[] kinds: the worker's grouped kinds
-- $2 float8[] rates: each one's group_rate per second (NULL: the task declares none)
-- Returns a row per wake-up moved.
-- index: group_wakes_rate_idx (token wake-ups only): a probe per kind, empty unless a
-- rate changed; the groups primary key for each one found.
PREPARE billing_jobs_group_refill_advance(text[], float8[]) AS
WITH mine AS (
    SELECT m.kind, m.rate FROM unnest($1::text[], $2::float8[]) AS m(kind, rate)
),
late AS (
    SELECT w.id, m.rate,
           -- greatest() passes over a NULL: a group without a bucket's state wakes now.
           CASE WHEN m.rate IS NULL THEN now()
                ELSE least(w.at, greatest(now(), g.refilled_at + make_interval(
                    secs => (1 - g.tokens) / m.rate)))
           END AS at
    FROM mine m
    JOIN "billing_jobs".group_wakes w
      ON w.kind = m.kind AND w.rate IS NOT NULL AND (m.rate IS NULL OR w.rate < m.rate)
    LEFT JOIN "billing_jobs".groups g ON g.kind = w.kind AND g.grp = w.grp
    -- A wake-up a claim holds is being applied.
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE "billing_jobs".group_wakes w
SET at = l.at, rate = l.rate
FROM late l
WHERE w.id = l.id
RETURNING w.kind, w.grp;

-- group_set: change a group's settings (venturi.set_group, venturi groups set); a group
-- never seen gets its row. A field whose "given" flag is false keeps its value; a given
-- NULL returns it to the task's default (cap: group_cap; weight: 1; paused: false).
-- Pausing takes the group out of the claim's ready groups; any other change adds a
-- wake-up, so the next claim looks at the group with its new settings, and notifies the
-- kind's workers as the caller's transaction commits (as kind_resume does): an idle
-- worker otherwise slept through a resume or a raised cap until poll_max.
-- $1 text kind: the group's kind
-- $2 text grp: the group
-- $3 boolean cap_given: whether $4 is to be set
-- $4 integer cap: the group's cap (NULL: the task's group_cap)
-- $5 boolean weight_given: whether $6 is to be set
-- $6 float8 weight: its weight in the fair share (NULL: 1)
-- $7 boolean paused_given: whether $8 is to be set
-- $8 boolean paused: pause (true) or resume (false, or NULL)
-- The group's row lock (group_key) is held to the caller's commit: a claim passes the
-- group by meanwhile (a group never seen; a known group's row lock does the same).
-- index: groups primary key; groups_ready_idx with jobs_group_claimed_idx (the current
-- minimum, when a cap is set); jobs_group_claim_idx (the group's first visible pending job).
PREPARE billing_jobs_group_set(text, text, boolean, integer, boolean, float8, boolean, boolean) AS
WITH written AS (
    -- The group's row lock first (the row is inserted from the row that takes it).
    INSERT INTO "billing_jobs".groups AS g (kind, grp, cap, weight, paused)
    SELECT $1::text, $2::text,
           CASE WHEN $3::boolean THEN $4::integer END,
           CASE WHEN $5::boolean THEN $6::float8 END,
           $7::boolean AND coalesce($8::boolean, false)
    FROM (SELECT pg_advisory_xact_lock(hashtextextended('venturi group "billing_jobs" ' || $1::text || E'\n' || $2::text, 0))) l
    ON CONFLICT (kind, grp) DO UPDATE
    SET cap = CASE WHEN $3::boolean THEN $4::integer ELSE g.cap END,
        weight = CASE WHEN $5::boolean THEN $6::float8 ELSE g.weight END,
        -- A cap set (raised, lowered, or returned to the task's) restarts a group behind the
        -- current minimum of the other groups with room: held at its cap, its time
        -- stood while theirs ran, and once raised it took every slot it could until it
        -- caught up (a hundred jobs before the other group's next, in the probe). It
        -- banks no credit, as a resumed or idle group banks none. (Lowered, it is held
        -- at least as long: a group behind the others then is one held at its cap.)
        -- A weight set does the same, and moves a group more than one step of its new
        -- weight ahead of that minimum back to it: at the least weight a group's time
        -- stood while the others ran (credit: given its weight back, it took every slot
        -- until it caught up), or one claim put it a million ahead (debt: given its
        -- weight back, it waited for the others' next million jobs).
        vtime = CASE WHEN $3::boolean OR $5::boolean THEN (
                    SELECT CASE WHEN lo.v IS NULL THEN g.vtime
                                WHEN $5::boolean
                                THEN least(greatest(g.vtime, lo.v), lo.v + 1 / coalesce($6::float8, 1)::numeric)
                                ELSE greatest(g.vtime, lo.v) END
                    FROM (SELECT (SELECT min(m.v) FROM (
                                     (SELECT e.vtime AS v FROM "billing_jobs".groups e
                                      CROSS JOIN LATERAL (
                                              SELECT count(*)::integer AS n
                                              FROM "billing_jobs".jobs c
                                              WHERE c.status = 'claimed' AND c.kind = $1::text AND c.grp = e.grp) r
                                      WHERE e.kind = $1::text AND e.ready AND e.head = 0 AND e.grp <> $2::text
                                        AND (coalesce(e.cap, e.task_cap) IS NULL OR r.n < coalesce(e.cap, e.task_cap))
                                      ORDER BY e.vtime
                                      LIMIT 1)
                                     UNION ALL
                                     (SELECT e.vtime AS v FROM "billing_jobs".groups e
                                      CROSS JOIN LATERAL (
                                              SELECT count(*)::integer AS n
                                              FROM "billing_jobs".jobs c
                                              WHERE c.status = 'claimed' AND c.kind = $1::text AND c.grp = e.grp) r
                                      WHERE e.kind = $1::text AND e.ready AND e.head = 1 AND e.grp <> $2::text
                                        AND (coalesce(e.cap, e.task_cap) IS NULL OR r.n < coalesce(e.cap, e.task_cap))
                                      ORDER BY e.vtime
                                      LIMIT 1)
                                     UNION ALL
                                     (SELECT e.vtime AS v FROM "billing_jobs".groups e
                                      CROSS JOIN LATERAL (
                                              SELECT count(*)::integer AS n
                                              FROM "billing_jobs".jobs c
                                              WHERE c.status = 'claimed' AND c.kind = $1::text AND c.grp = e.grp) r
                                      WHERE e.kind = $1::text AND e.ready AND e.head = 2 AND e.grp <> $2::text
                                        AND (coalesce(e.cap, e.task_cap) IS NULL OR r.n < coalesce(e.cap, e.task_cap))
                                      ORDER BY e.vtime
                                      LIMIT 1)
                                 ) m) AS v) lo)
                ELSE g.vtime END,
        paused = CASE WHEN $7::boolean THEN coalesce($8::boolean, false) ELSE g.paused END,
        ready = g.ready AND NOT ($7::boolean AND coalesce($8::boolean, false))
    RETURNING g.kind, g.grp, g.cap, g.weight, g.paused
),
-- The wake-up is at the tier of the group's first visible pending job, as a job's own
-- wake-up is: a group not ready takes its wake-up's tier for its place among the ready
-- groups (job_claim_grouped's `waking`), and at the default tier a HIGH job enqueued
-- while its group was paused waited, once resumed, behind every other group's NORMAL
-- jobs until its group's first claim. No such job: the default tier (the next job's own
-- wake-up brings its tier).
woken AS (
    INSERT INTO "billing_jobs".group_wakes (kind, grp, at, priority)
    SELECT w.kind, w.grp, now(), coalesce((
        SELECT j.priority FROM "billing_jobs".jobs j
        WHERE j.status = 'pending' AND j.grp IS NOT NULL AND j.kind = w.kind
          AND j.grp = w.grp AND j.visible_at <= now()
        ORDER BY j.priority
        LIMIT 1), 1)
    FROM written w WHERE NOT w.paused
)
SELECT kind, grp, cap, weight, paused,
       CASE WHEN NOT paused THEN pg_notify('billing_jobs_pending', kind)::text END AS notified
FROM written;

-- group_shares: for each of these kinds, the summed weight of its groups with work (the
-- ready ones, less the paused: a group paused stays in the ready index until a claim
-- takes it out) and the best tier among them. A worker gives the jobs without a group
-- of a kind whose groups are backlogged one group's share of its claims beside them
-- (SPEC 13: "jobs without a group share one group of their own"; runtime/shares.py):
-- weight 1 against the groups' summed weights. Asked about once a second, beside the
-- loop, and only about kinds whose jobs without a group the worker claims or holds back.
-- $1 text[] kinds
-- index: groups_ready_idx for the tier; the ready groups' rows for their weights (a read
-- per group with work, as a claim of each of them makes).
PREPARE billing_jobs_group_shares(text[]) AS
SELECT k.kind,
       coalesce(sum(coalesce(g.weight, 1)) FILTER (WHERE NOT g.paused), 0)::float8 AS weights,
       min(g.head) FILTER (WHERE NOT g.paused) AS head
FROM unnest($1::text[]) AS k(kind)
LEFT JOIN "billing_jobs".groups g ON g.kind = k.kind AND g.ready
GROUP BY k.kind;

-- group_statistics_state: whether the planner's statistics of the groups table misjudge
-- its ready groups (the claim loop asks when a full grouped claim was slow;
-- venturi.runtime.statistics). Without them (a burst into thousands of groups first
-- seen, on a table never analyzed or analyzed nearly empty) the grouped claim's plan
-- reads every ready group of the kind, with its claimed count, and sorts them, where
-- groups_ready_idx gives the first few in order (benchmarks/JOURNAL.md, the fourteenth
-- session).
-- believed: the ready groups the last ANALYZE saw (the rows it saw times the share of
-- ready = true among the column's most common values; 0 for a table never analyzed).
-- Below $3 the ready groups are counted, up to $1 times the belief plus $2; stale: more
-- than that. From $3 on nothing is counted.
-- allowed: whether this role may analyze the table (its owner or a member of its role).
-- $1 float8 factor: how many times the belief the ready groups may be before it is stale
-- $2 bigint minimum: ready groups beyond the belief that never make it stale
-- $3 bigint enough: a belief from which nothing is counted
-- index: groups_ready_idx (ready groups only), at most $1 * believed + $2 of its entries.
PREPARE billing_jobs_group_statistics_state(float8, bigint, bigint) AS
WITH believed AS (
    SELECT c.oid, c.relowner,
           greatest(c.reltuples, 0) * coalesce((
               SELECT f.freq
               FROM pg_stats s
               JOIN pg_namespace n ON n.nspname = s.schemaname AND n.oid = c.relnamespace
               CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[],
                                         s.most_common_freqs) AS f(val, freq)
               WHERE s.tablename = c.relname AND s.attname = 'ready'
                 AND f.val = 't'), 0) AS ready
    FROM pg_class c
    WHERE c.oid = to_regclass('"billing_jobs".groups')
)
SELECT b.ready < $3::bigint
       AND (SELECT count(*) FROM (
                SELECT 1 FROM "billing_jobs".groups g WHERE g.ready
                LIMIT ($1::float8 * b.ready + $2::bigint)::bigint + 1) AS p)
           > $1::float8 * b.ready + $2::bigint AS stale,
       pg_has_role(b.relowner, 'MEMBER') AS allowed
FROM believed b;

-- group_wake_stranded: wake every group that has a pending job visible now yet is neither
-- ready, paused, nor due any wake-up. The claim never leaves a group so (docs/groups.md,
-- "Why no grouped job is left behind"); this is the workers' check that nothing did, by
-- whatever cause, as stale recovery is for a lost worker: without it such a group's jobs
-- would wait for good. A group it finds is a bug, which the worker logs as a warning.
-- Any consistent snapshot holds the rule, so a group found is never a race's passing
-- state. Returns the groups woken, with the tier of the first visible job of each, and
-- what a report of the bug needs: that job's id and visible time, and the group's row as
-- it stood (its xmin, claims, head and virtual time; NULL when it has none).
-- No parameters.
-- index: jobs_group_claim_idx, one probe per (kind, group) with pending jobs (a loose index
-- scan) and one for its first visible job; the groups primary key; group_wakes_due_idx.
PREPARE billing_jobs_group_wake_stranded AS
WITH RECURSIVE pending AS (
    (SELECT j.kind, j.grp FROM "billing_jobs".jobs j
     WHERE j.status = 'pending' AND j.grp IS NOT NULL
     ORDER BY j.kind, j.grp
     LIMIT 1)
    UNION ALL
    SELECT n.kind, n.grp FROM pending p
    CROSS JOIN LATERAL (
        SELECT j.kind, j.grp FROM "billing_jobs".jobs j
        WHERE j.status = 'pending' AND j.grp IS NOT NULL AND (j.kind, j.grp) > (p.kind, p.grp)
        ORDER BY j.kind, j.grp
        LIMIT 1
    ) n
),
stranded AS (
    SELECT p.kind, p.grp, v.priority, v.id AS job_id, v.visible_at, g.xmin AS row_xmin,
           g.claims, g.head, g.vtime
    FROM pending p
    -- By the primary key, one probe per group (the LIMIT keeps the planner from making
    -- it a join): not a hash of every group ever seen.
    LEFT JOIN LATERAL (
        SELECT g.ready, g.paused, g.xmin::text AS xmin, g.claims, g.head, g.vtime
        FROM "billing_jobs".groups g WHERE g.kind = p.kind AND g.grp = p.grp
        LIMIT 1
    ) g ON true
    CROSS JOIN LATERAL (
        SELECT j.priority, j.id, j.visible_at FROM "billing_jobs".jobs j
        WHERE j.status = 'pending' AND j.grp IS NOT NULL AND j.kind = p.kind
          AND j.grp = p.grp AND j.visible_at <= now()
        ORDER BY j.priority
        LIMIT 1
    ) v
    WHERE NOT coalesce(g.ready OR g.paused, false)
      AND NOT EXISTS (SELECT 1 FROM "billing_jobs".group_wakes w WHERE w.kind = p.kind AND w.grp = p.grp)
),
-- The wake-ups; a data-modifying CTE runs whether or not it is read.
woken AS (
    INSERT INTO "billing_jobs".group_wakes (kind, grp, at, priority)
    SELECT s.kind, s.grp, now(), s.priority FROM stranded s
)
SELECT s.kind, s.grp, s.priority, s.job_id, s.visible_at, s.row_xmin, s.claims, s.head, s.vtime
FROM stranded s;

-- job_activity_of_kind: one kind's completions, failed executions and deaths in each of
-- the last $4 buckets of $3 seconds, oldest first, every bucket present (zero when idle):
-- the charts of the dashboard's kind page (1 h by the minute, 24 h and 7 d by wider
-- buckets).
-- $1 text kind: the kind
-- $2 text manual_detail: the journal detail of an operator's retry, not counted a failure
-- $3 float8 bucket: seconds per bucket
-- $4 integer buckets: how many buckets, the current one included
-- index: jobs_finished_idx (status, finished_at) INCLUDE (kind), a range scan of the
-- period's completed and dead jobs, or jobs_kind_id_idx when the kind is the narrower
-- (the planner's choice); journal_at_idx for the failures, each joined to its job by the
-- primary key.
PREPARE billing_jobs_job_activity_of_kind(text, text, float8, integer) AS
WITH bounds AS (
    SELECT make_interval(secs => $3::float8) AS width,
           date_bin(make_interval(secs => $3::float8), now(), timestamptz '2000-01-01')
               - make_interval(secs => $3::float8 * ($4::integer - 1)) AS first
),
buckets AS (
    SELECT generate_series(b.first, b.first + b.width * ($4::integer - 1), b.width) AS at
    FROM bounds b
),
finished AS (
    SELECT date_bin(b.width, j.finished_at, timestamptz '2000-01-01') AS at,
           count(*) FILTER (WHERE j.status = 'completed') AS completed,
           count(*) FILTER (WHERE j.status = 'dead') AS dead
    FROM "billing_jobs".all_jobs j, bounds b
    WHERE j.status IN ('completed', 'dead')
      AND j.finished_at >= b.first
      AND j.kind = $1::text
    GROUP BY 1
),
failed AS (
    SELECT date_bin(b.width, e.at, timestamptz '2000-01-01') AS at, count(*) AS n
    FROM "billing_jobs".journal e
    JOIN "billing_jobs".all_jobs j ON j.id = e.job_id, bounds b
    WHERE e.at >= b.first
      AND e.event IN ('failed', 'retried', 'timed-out', 'stale-recovered')
      AND e.detail IS DISTINCT FROM $2::text
      AND j.kind = $1::text
    GROUP BY 1
)
SELECT k.at AS minute, coalesce(f.completed, 0) AS completed,
       coalesce(x.n, 0) AS failures, coalesce(f.dead, 0) AS dead
FROM buckets k
LEFT JOIN finished f ON f.at = k.at
LEFT JOIN failed x ON x.at = k.at
ORDER BY k.at;

-- job_activity_per_minute: completions and failed executions in each of the last $2
-- minutes, oldest first, every minute present (zero when idle): the dashboard's charts.
-- $1 text manual_detail: the journal detail of an operator's retry, not counted a failure
-- $2 integer minutes: how many minutes, the current one included
-- index: jobs_finished_idx (a range scan of recent completions, index only),
-- journal_at_idx.
PREPARE billing_jobs_job_activity_per_minute(text, integer) AS
WITH minutes AS (
    SELECT generate_series(
               date_trunc('minute', now()) - make_interval(mins => $2::integer - 1),
               date_trunc('minute', now()),
               interval '1 minute') AS minute
),
done AS (
    SELECT date_trunc('minute', finished_at) AS minute, count(*) AS n
    FROM "billing_jobs".all_jobs
    WHERE status = 'completed'
      AND finished_at >= date_trunc('minute', now()) - make_interval(mins => $2::integer - 1)
    GROUP BY 1
),
failed AS (
    SELECT date_trunc('minute', at) AS minute, count(*) AS n
    FROM "billing_jobs".journal
    WHERE at >= date_trunc('minute', now()) - make_interval(mins => $2::integer - 1)
      AND event IN ('failed', 'retried', 'timed-out', 'stale-recovered')
      AND detail IS DISTINCT FROM $1::text
    GROUP BY 1
)
SELECT m.minute, coalesce(d.n, 0) AS completed, coalesce(f.n, 0) AS failures
FROM minutes m
LEFT JOIN done d ON d.minute = m.minute
LEFT JOIN failed f ON f.minute = m.minute
ORDER BY m.minute;

-- job_cancel_if_owned: settle a running job an operator cancelled (its handler stopped
-- or finished without completing): cancelled, finished now; not a failure.
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text detail: what the handler did when asked to stop
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_cancel_if_owned(uuid, bigint, integer, text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'cancelled', finished_at = now(), claim_expires_at = NULL,
        claim_token = NULL
    WHERE j.id = $2 AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at, j.claimed_by
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'cancelled', attempt, claimed_by, $4 FROM settled
)
SELECT id FROM settled;

-- job_cancel_many: an operator's cancel: pending and waiting jobs become cancelled now
-- (journaled; workflow_settled cascades to their children and dependents);
-- for claimed jobs the request is recorded in cancel_requested_at, and the worker holding
-- the claim settles them. Returns one row per distinct input id with what was done, and
-- for a job cancelled here the cascade's share: the unfinished children and dependents
-- cancelled with it, and the claimed ones asked to stop (each job under the lowest input
-- id that reaches it; none of the input ids themselves).
-- $1 bigint[] ids: the jobs to cancel
-- $2 text operator: who asked, for the journal's worker column
-- $3 text detail: the journal entry's detail
-- index: primary key; dependencies_depends_on_idx and jobs_parent_idx for the cascade.
PREPARE billing_jobs_job_cancel_many(bigint[], text, text) AS
WITH RECURSIVE input AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
),
cancelled AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'cancelled', finished_at = now(), claim_expires_at = NULL, wake_at = NULL
    FROM input
    WHERE j.id = input.id AND j.status IN ('pending', 'waiting')
    RETURNING j.id, j.attempt
),
-- A job claimed meanwhile fails the re-check above and is not matched here either (this
-- CTE reads the snapshot, where it was pending): the caller sees action NULL and asks again.
requested AS (
    UPDATE "billing_jobs".jobs j
    SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
    FROM input
    WHERE j.id = input.id AND j.status = 'claimed'
    RETURNING j.id
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), 'cancelled', attempt, $2::text, $3::text FROM cancelled
),
-- What workflow_settled's cascade does at the statement's end (unseen by this statement),
-- read from its snapshot: from a linked job cancelled, its dependents and children
-- unfinished; pending or waiting ones are cancelled and cascade in turn, claimed ones
-- are asked to stop and cascade once their worker settles them.
cascade (root, id, action) AS (
    SELECT j.id, j.id, 'cancelled' FROM "billing_jobs".jobs j JOIN input ON input.id = j.id
    WHERE j.status IN ('pending', 'waiting')
    UNION
    SELECT c.root, n.id,
           CASE WHEN n.status = 'claimed' THEN 'requested' ELSE 'cancelled' END
    FROM cascade c
    JOIN "billing_jobs".jobs p ON p.id = c.id AND p.linked
    JOIN LATERAL (
        SELECT d.job_id AS id FROM "billing_jobs".dependencies d WHERE d.depends_on = p.id
        UNION
        SELECT k.id FROM "billing_jobs".jobs k WHERE k.parent_id = p.id
    ) nxt ON true
    JOIN "billing_jobs".jobs n ON n.id = nxt.id AND n.status IN ('pending', 'waiting', 'claimed')
    WHERE c.action = 'cancelled'
),
cascade_once AS (
    SELECT DISTINCT ON (id) root, id, action FROM cascade
    WHERE id NOT IN (SELECT id FROM input)
    ORDER BY id, root
),
cascade_by_root AS (
    SELECT root,
           array_agg(id ORDER BY id) FILTER (WHERE action = 'cancelled') AS cancelled,
           array_agg(id ORDER BY id) FILTER (WHERE action = 'requested') AS requested
    FROM cascade_once GROUP BY root
)
SELECT input.id, j.kind, j.status AS was, j.claimed_by,
       CASE WHEN c.id IS NOT NULL THEN 'cancelled'
            WHEN r.id IS NOT NULL THEN 'requested'
       END AS action,
       coalesce(cb.cancelled, '{}') AS cascade_cancelled,
       coalesce(cb.requested, '{}') AS cascade_requested
FROM input
LEFT JOIN "billing_jobs".all_jobs j ON j.id = input.id
LEFT JOIN cancelled c ON c.id = input.id
LEFT JOIN requested r ON r.id = input.id
LEFT JOIN cascade_by_root cb ON cb.root = input.id AND c.id IS NOT NULL
ORDER BY input.id;

-- job_children_failed_list: the children of some jobs that ended dead or cancelled, and
-- theirs in turn (a cancelled parent's cancel reached its children's children too),
-- live or moved to the history: what `venturi jobs retry --with-children` retries with
-- a parent, whose replayed gather would otherwise raise ChildFailed again. A child that
-- completed is left out, and so are its own children (its result stands).
-- $1 bigint[] ids: the parents
-- $2 integer limit: the most descendants returned
-- index: jobs_parent_idx and jobs_history_parent_idx.
PREPARE billing_jobs_job_children_failed_list(bigint[], integer) AS
WITH RECURSIVE failed AS (
    SELECT c.id, c.parent_id, 1 AS depth
    FROM "billing_jobs".all_jobs c
    WHERE c.parent_id = ANY ($1::bigint[]) AND c.status IN ('dead', 'cancelled')
    UNION
    SELECT c.id, c.parent_id, f.depth + 1
    FROM failed f
    JOIN "billing_jobs".all_jobs c ON c.parent_id = f.id
    -- A depth bound keeps a corrupted parent chain (a cycle by hand) from looping.
    WHERE c.status IN ('dead', 'cancelled') AND f.depth < 64
)
SELECT DISTINCT id, parent_id FROM failed
ORDER BY id
LIMIT $2::integer;

-- job_claim: settle finished jobs as completed, then claim up to $5 eligible jobs, in one
-- statement so a loop iteration costs one round trip and one commit. Expired claims are
-- not recovered here: job_recover_stale does that on the worker's own timer (a claim is
-- the pickup path, and it stays as light as it can).
-- Rows with lost = false are the claimed jobs; lost = true are the completions that did
-- not apply (the job lost its claim): every other one of $6 applied. The worker decodes
-- every row it is sent, so the common case, every completion applied, sends none.
-- $1 text claimed_by: identity stamped on every claimed row (host:pid), for diagnostics
-- $2 text[] kinds: the claim filter (registered kinds minus those at their cap)
-- $3 float8[] leases: lease in seconds of each kind in $2, same order
-- $4 smallint priority_floor: 0 takes every tier; 1 or 2 reserves the claim for lower
-- tiers first, the rest of $5 then from every tier
-- $5 integer claim_limit: free slots to fill; the worker starts every claimed job at once
-- $6 bigint[] done_ids: jobs this worker finished, to settle as completed (may be empty)
-- $7 integer[] done_attempts: the claim (attempt) each was run under
-- $8 text[] done_results: msgspec-encoded JSON result of each (NULL: none)
-- $9 uuid claim_token: this worker run's ownership token, stamped on claims, required of completions
-- $10 boolean synchronous_commit: false commits without waiting for the WAL flush
-- (_commit_mode.sql.j2: a crash can then lose these writes, and the jobs run again)
-- index: jobs_claim_idx (pending rows without a group by priority, rank, created_at; the
-- grouped ones are job_claim_grouped's, in an index of their own); primary key for the
-- completions and the claimed rows.
PREPARE billing_jobs_job_claim(text, text[], float8[], smallint, integer, bigint[], integer[], text[], uuid, boolean) AS
WITH completed AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'completed', finished_at = now(), claim_expires_at = NULL,
        -- A row that is not claimed holds no token: a claim by an older venturi, which
        -- does not stamp one, can then never carry this run's.
        claim_token = NULL,
        result = done.result::jsonb
    -- Every parameter that sizes an estimate is read through a sub-select (see
    -- job_claim's candidates): custom and generic plans then cost the same, and PostgreSQL
    -- keeps the generic plan whatever the statistics, rather than weigh the two on a
    -- knife-edge when the table has none yet.
    FROM unnest((SELECT $6::bigint[]), (SELECT $7::integer[]),
                (SELECT $8::text[]))
        AS done(id, attempt, result)
    -- "id = ANY" as well as the join: a plan must reach the rows by the primary key
    -- without knowing how many ids it is given (the generic plan).
    WHERE j.id = ANY ((SELECT $6::bigint[])::bigint[]) AND j.id = done.id
      -- The ownership guard (statements/_owned.sql.j2, which says why 'claimed' is a
      -- sub-select): a reclaimed job (new attempt or new owner) is left alone.
      AND j.status = (SELECT 'claimed') AND j.claim_token = $9::uuid AND j.attempt = done.attempt
      AND (SELECT CASE WHEN $10::boolean THEN true
             ELSE set_config('synchronous_commit', 'off', true) = 'off' END)
    RETURNING j.id
),
candidates AS (
    -- The outer LIMIT, a constant no claim reaches, is the one bound the planner can see:
    -- it estimates the sub-select's LIMIT below at a tenth of the table (a million rows
    -- of ten million pending), which priced the plan past PostgreSQL's jit_above_cost, and
    -- every claim then compiled its plan (25 ms a claim: benchmarks/README.md, "Ten
    -- million pending, rerun"). With it the estimate is the bound's, whatever the table.
    SELECT id FROM (
    SELECT id FROM "billing_jobs".jobs j
    -- A pending job whose time has come, without a group (statements/_claim.sql.j2).
    WHERE j.status = 'pending' AND j.visible_at <= now()
      AND j.grp IS NULL
      AND j.kind = ANY (ARRAY(
          SELECT k FROM unnest($2::text[]) AS k
          WHERE NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = k)))
      -- Anti-starvation: a raised floor reserves this claim for the lower tiers.
      AND priority >= (SELECT $4::smallint)
    -- The tier, the order within it (rank, 0 unless set), then age.
    ORDER BY j.priority, j.rank, j.created_at, j.id
    -- A sub-select, not "LIMIT $5": a custom plan would fold a bare $5 into a constant,
    -- cost itself below the generic plan and so be planned anew for every claim (the
    -- planning was ~60% of the statement's server time). As a sub-select, custom and
    -- generic plans estimate the same row count, and PostgreSQL keeps the generic plan
    -- after five executions. Both plans must then hold on any table size: every step
    -- reaches rows by an index (the id lists by the primary key, below).
    LIMIT (SELECT $5::integer)
    -- Concurrent claims take distinct rows without waiting on each other.
    FOR UPDATE SKIP LOCKED
    ) AS c
    LIMIT 10000
),
-- A claim reserved for the lower tiers that found fewer rows than it may take fills the
-- rest from every tier, here: the rows a second claim at floor 0 would take, without
-- its round trip (a reserved tier is often empty: every 16th claim with the default
-- ratio of 4 when no job is LOW). At floor 0 the gate below skips it without a scan.
fallback AS (
    -- Bounded as candidates is, for the planner's estimate.
    SELECT id FROM (
    SELECT id FROM "billing_jobs".jobs j
    WHERE (SELECT $4::smallint) > 0
      AND j.status = 'pending' AND j.visible_at <= now()
      AND j.grp IS NULL
      AND j.kind = ANY (ARRAY(
          SELECT k FROM unnest($2::text[]) AS k
          WHERE NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = k)))
      -- This statement's own locks do not make SKIP LOCKED skip a row: leave them out.
      AND id <> ALL (ARRAY(SELECT id FROM candidates))
    ORDER BY j.priority, j.rank, j.created_at, j.id
    LIMIT (SELECT $5::integer - (SELECT count(*) FROM candidates))
    FOR UPDATE SKIP LOCKED
    ) AS f
    LIMIT 10000
),
claimed AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'claimed',
        claimed_by = $1,
        claim_token = $9::uuid,
        claimed_at = now(),
        attempt = j.attempt + 1,
        claim_expires_at = now() + make_interval(secs => lease.seconds)
    FROM unnest((SELECT $2::text[]), (SELECT $3::float8[])) AS lease(kind, seconds)
    -- The candidates as an id list: a join with the CTE is planned for the row count
    -- of an unknown LIMIT (a tenth of the backlog), a hash join over the whole table.
    WHERE j.id = ANY (ARRAY(SELECT id FROM candidates UNION ALL SELECT id FROM fallback))
      AND lease.kind = j.kind
      AND (SELECT CASE WHEN $10::boolean THEN true
             ELSE set_config('synchronous_commit', 'off', true) = 'off' END)
    RETURNING j.id, j.kind, j.priority, j.carry::text AS carry, j.attempt,
              j.failures, (extract(epoch FROM j.created_at) * 1000000)::bigint AS created_us,
              extract(epoch FROM now() - j.visible_at)::float8 AS waited,
              j.traceparent, j.grp
)
SELECT false AS lost, id, kind, priority, carry, attempt, failures, created_us, waited,
       traceparent, grp
FROM claimed
UNION ALL
-- (completed runs whether or not it is read: PostgreSQL runs every data-modifying CTE.)
SELECT true, d.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest((SELECT $6::bigint[])) AS d(id)
WHERE d.id NOT IN (SELECT id FROM completed);

-- job_claim_capped: claim up to $4 jobs of one kind with a global cap, so that at most $5
-- jobs of the kind are claimed across every worker together, in one statement: the
-- schema's claim_capped_v3 function takes the kind's advisory cap lock (held to commit),
-- then counts the kind's claimed rows in a snapshot taken after it and claims within
-- the room left. A released, recovered or settled job is no longer claimed, so it frees
-- its place. The rows with an id are the claimed jobs; one more row, without an id,
-- says how many of the kind are claimed once this commits (held).
-- $1 text claimed_by: identity stamped on every claimed row (host:pid), for diagnostics
-- $2 text kind: the capped kind
-- $3 float8 lease: its lease in seconds
-- $4 integer claim_limit: this worker's free slots for the kind
-- $5 integer global_cap: most jobs of the kind claimed at once across every worker
-- $6 uuid claim_token: this worker run's ownership token, stamped on claims
-- $7 smallint priority_floor: 0 takes every tier; 1 or 2 puts those tiers first, the
-- rest of the room then from every tier
-- index: jobs_stale_idx (claimed rows, to count: few, at most every worker's slots);
-- jobs_claim_idx for the kind's pending rows (jobs without a group only: a capped kind's
-- grouped jobs are claimed by job_claim_grouped under the same lock).
-- The worker's columns of the function's (statements/_claim.sql.j2, claimed_columns).
PREPARE billing_jobs_job_claim_capped(text, text, float8, integer, integer, uuid, smallint) AS
SELECT c.id, c.kind, c.priority, c.carry, c.attempt, c.failures,
       (extract(epoch FROM c.created_at) * 1000000)::bigint AS created_us, c.waited, c.traceparent, c.grp, c.held
FROM "billing_jobs".claim_capped_v3($1::text, $2::text, $3::float8, $4::integer, $5::integer,
                             $6::uuid, $7::smallint) AS c;

-- job_claim_grouped: claim up to $5 grouped jobs of one kind (SPEC 13), each group within
-- its cap and its token bucket, the groups in order of their virtual time (fair share),
-- in one statement. docs/groups.md gives the argument; in short:
-- * A group's jobs are claimed only here, under the group's row lock (FOR UPDATE SKIP
--   LOCKED: a group another claim holds is skipped, never waited for). Its claimed jobs
--   are those this statement's snapshot sees claimed, plus the claims made since the
--   snapshot, which the locked row's `claims` counts (it is the newest version, and only
--   a holder of the lock adds to it): an upper bound, so the cap is never passed.
-- * A group becomes ready through group_wakes, which every writer inserts into and only
--   claims delete; a claim deletes the wake-ups of the groups it locks and updates each
--   of those rows, and parks a group (ready = false) only if no one updated its row
--   since this statement's snapshot: a job this snapshot cannot see then still has its
--   wake-up.
-- * A group first seen has no row to lock: the claim takes the group's advisory lock in its
--   place (group_key; a claim or a set_group holding it is passed by), inserts its row,
--   and takes its jobs only if the insert is its own, so the row's lock is still the one
--   way in.
-- * The claim's clock (`clock`) is read once, after its snapshot, not `now()` (its
--   transaction's start, which comes before the snapshot by the statement's planning when
--   a plan is made for it, as on a connection's first executions, and by the wait for the
--   kind's cap lock in a global_cap claim's transaction). Every
--   wake-up this or an earlier claim applied was due by a clock read before that claim
--   committed, hence before this snapshot and before this clock: its job is claimable
--   here. With now() a claim could see a job whose wake-up an earlier claim had applied,
--   find it not yet visible by its older clock, and park its group with no wake-up left
--   (the long chaos run of December 2026 found such groups; docs/chaos.md). The groups'
--   token buckets refill by it too: by now(), claims inside one long transaction (drain
--   on a test's Connection) never refilled a bucket, whose token wake-up came due.
-- A kind an operator paused (paused_kinds) is left alone, as every claim leaves it: no job
-- claimed, no wake-up applied, no group parked; the completions still apply.
-- Completions ride the claim as in job_claim ($12-$14: one round trip and one commit for
-- both). A job completed here frees its group's place in this statement (its snapshot
-- sees it claimed, and the completion commits with the claim): never twice, never
-- before it is settled.
-- The rows with lost = false are the claimed jobs; lost = true, the completions that did
-- not apply (the job lost its claim; every other one of $12 applied, and the common
-- answer, all of them, sends no row: job_claim's); one row without an id says
-- how many jobs of the kind are claimed once this commits (held, with a global cap),
-- how many groups were made ready and gave no job (woken: first seen or woken past the
-- batch's size, or taken from with no room), how many were held by other claims (busy,
-- plus one when the claim stopped at one of its bounds, GROUP_BOUND and JOB_BOUND below)
-- and how many left the ready groups (parked): each is a reason to claim again at once
-- (the groups behind them may have work); and, when it claimed nothing, the seconds until
-- the kind's next wake-up is due (next_wake; NULL: none), when a kind whose claim found
-- nothing to do is worth claiming again (a busy worker asks no idle lookup).
-- $1 text claimed_by: identity stamped on every claimed row (host:pid)
-- $2 text kind: the kind to claim
-- $3 float8 lease: its lease in seconds
-- $4 smallint priority_floor: 0 takes every tier; 1 or 2 puts those tiers first
-- $5 integer claim_limit: free slots to fill
-- $6 uuid claim_token: this worker run's ownership token
-- $7 integer group_cap: the task's group_cap (NULL: none); a group's own cap wins
-- $8 float8 group_rate: the task's group_rate per second (NULL: none)
-- $9 integer group_burst: its bucket size
-- $10 integer global_cap: the kind's global cap (NULL: none); the caller holds the kind's
-- cap lock (kind_cap_lock) from an earlier statement of this transaction
-- $11 boolean synchronous_commit: false commits without waiting for the WAL flush
-- $12 bigint[] done_ids: jobs this worker finished, to settle as completed (may be empty)
-- $13 integer[] done_attempts: the claim (attempt) each was run under
-- $14 text[] done_results: msgspec-encoded JSON result of each (NULL: none)
-- index: group_wakes_due_idx; groups_ready_idx (ready groups by tier and virtual time);
-- jobs_group_claimed_idx (a group's claimed jobs); jobs_group_claim_idx (a group's
-- pending jobs in claim order); the primary keys for the rows written.
PREPARE billing_jobs_job_claim_grouped(text, text, float8, smallint, integer, uuid, integer, float8, integer, integer, boolean, bigint[], integer[], text[]) AS
WITH clock AS MATERIALIZED (
    -- One reading, after the snapshot (volatile: evaluated once, where first read).
    SELECT clock_timestamp() AS at
),
completed AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'completed', finished_at = now(), claim_expires_at = NULL,
        -- A row that is not claimed holds no token: a claim by an older venturi, which
        -- does not stamp one, can then never carry this run's.
        claim_token = NULL,
        result = done.result::jsonb
    -- Every parameter that sizes an estimate is read through a sub-select (see
    -- job_claim's candidates): custom and generic plans then cost the same, and PostgreSQL
    -- keeps the generic plan whatever the statistics, rather than weigh the two on a
    -- knife-edge when the table has none yet.
    FROM unnest((SELECT $12::bigint[]), (SELECT $13::integer[]),
                (SELECT $14::text[]))
        AS done(id, attempt, result)
    -- "id = ANY" as well as the join: a plan must reach the rows by the primary key
    -- without knowing how many ids it is given (the generic plan).
    WHERE j.id = ANY ((SELECT $12::bigint[])::bigint[]) AND j.id = done.id
      -- The ownership guard (statements/_owned.sql.j2, which says why 'claimed' is a
      -- sub-select): a reclaimed job (new attempt or new owner) is left alone.
      AND j.status = (SELECT 'claimed') AND j.claim_token = $6::uuid AND j.attempt = done.attempt
      AND (SELECT CASE WHEN $11::boolean THEN true
             ELSE set_config('synchronous_commit', 'off', true) = 'off' END)
    RETURNING j.id, j.kind, j.grp
),
due AS (
    -- Wake-ups due for this kind, oldest first; a row another claim holds is its.
    SELECT w.id, w.grp, w.priority FROM "billing_jobs".group_wakes w
    WHERE w.kind = $2::text AND w.at <= (SELECT k.at FROM clock k) AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = $2::text)
    ORDER BY w.at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
),
due_groups AS (
    SELECT d.grp, min(d.priority)::smallint AS priority FROM due d GROUP BY d.grp
),
-- Where a waking group starts (no banked credit): the least virtual time of the ready
-- groups with room (_group_restart.sql.j2's least_ready: not of a group held at its
-- cap); when every ready group is at its cap, the least of theirs; else the greatest of
-- the kind's groups (all idle then: groups_vtime_idx holds the idle ones).
restart AS (
    SELECT coalesce(
        (SELECT min(m.v) FROM (
    (SELECT e.vtime AS v FROM "billing_jobs".groups e
     CROSS JOIN LATERAL (
             SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                      WHERE x.kind = $2::text AND x.grp = e.grp) AS n
             FROM "billing_jobs".jobs c
             WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = e.grp) r
     WHERE e.kind = $2::text AND e.ready AND e.head = 0 AND true
       AND (coalesce(e.cap, $7::integer) IS NULL OR r.n < coalesce(e.cap, $7::integer))
     ORDER BY e.vtime
     LIMIT 1)
    UNION ALL
    (SELECT e.vtime AS v FROM "billing_jobs".groups e
     CROSS JOIN LATERAL (
             SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                      WHERE x.kind = $2::text AND x.grp = e.grp) AS n
             FROM "billing_jobs".jobs c
             WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = e.grp) r
     WHERE e.kind = $2::text AND e.ready AND e.head = 1 AND true
       AND (coalesce(e.cap, $7::integer) IS NULL OR r.n < coalesce(e.cap, $7::integer))
     ORDER BY e.vtime
     LIMIT 1)
    UNION ALL
    (SELECT e.vtime AS v FROM "billing_jobs".groups e
     CROSS JOIN LATERAL (
             SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                      WHERE x.kind = $2::text AND x.grp = e.grp) AS n
             FROM "billing_jobs".jobs c
             WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = e.grp) r
     WHERE e.kind = $2::text AND e.ready AND e.head = 2 AND true
       AND (coalesce(e.cap, $7::integer) IS NULL OR r.n < coalesce(e.cap, $7::integer))
     ORDER BY e.vtime
     LIMIT 1)
) m),
        (SELECT min(m.v) FROM (
    (SELECT e.vtime AS v FROM "billing_jobs".groups e
     WHERE e.kind = $2::text AND e.ready AND e.head = 0 AND true
     ORDER BY e.vtime
     LIMIT 1)
    UNION ALL
    (SELECT e.vtime AS v FROM "billing_jobs".groups e
     WHERE e.kind = $2::text AND e.ready AND e.head = 1 AND true
     ORDER BY e.vtime
     LIMIT 1)
    UNION ALL
    (SELECT e.vtime AS v FROM "billing_jobs".groups e
     WHERE e.kind = $2::text AND e.ready AND e.head = 2 AND true
     ORDER BY e.vtime
     LIMIT 1)
) m),
        (SELECT g.vtime FROM "billing_jobs".groups g
         WHERE g.kind = $2::text AND NOT g.ready ORDER BY g.vtime DESC LIMIT 1),
        0) AS v
),
-- The groups this claim takes from, locked, by tier then virtual time: first those in the
-- tiers at or below the floor (anti-starvation), then every tier. With the floor at the
-- first tier (most claims) the first scan is already every tier: the second is not run.
-- (A locking clause may not stand in a branch of a UNION: each scan is a sub-select.)
ready AS (
    SELECT DISTINCT ON (c.grp) c.* FROM (
        SELECT * FROM (
            SELECT * FROM (
    SELECT g.grp, g.xmin AS newest, g.claims, g.vtime, g.weight, g.cap, g.tokens,
           g.refilled_at, r.n AS running, g.head
    FROM "billing_jobs".groups g
    CROSS JOIN LATERAL (
        SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                 WHERE x.kind = $2::text AND x.grp = g.grp) AS n
        FROM "billing_jobs".jobs c
        WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = g.grp) r
    WHERE g.kind = $2::text AND g.ready AND NOT g.paused AND g.head >= $4::smallint
      AND (coalesce(g.cap, $7::integer) IS NULL OR r.n < coalesce(g.cap, $7::integer))
      AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = $2::text)
    ORDER BY g.head, g.vtime
    LIMIT (SELECT $5::integer)
    FOR UPDATE OF g SKIP LOCKED
    ) b
    LIMIT 500
        ) f
        UNION ALL
        SELECT * FROM (
            SELECT * FROM (
    SELECT g.grp, g.xmin AS newest, g.claims, g.vtime, g.weight, g.cap, g.tokens,
           g.refilled_at, r.n AS running, g.head
    FROM "billing_jobs".groups g
    CROSS JOIN LATERAL (
        SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                 WHERE x.kind = $2::text AND x.grp = g.grp) AS n
        FROM "billing_jobs".jobs c
        WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = g.grp) r
    WHERE g.kind = $2::text AND g.ready AND NOT g.paused AND (SELECT $4::smallint) > 0
      AND (coalesce(g.cap, $7::integer) IS NULL OR r.n < coalesce(g.cap, $7::integer))
      AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = $2::text)
    ORDER BY g.head, g.vtime
    LIMIT (SELECT $5::integer)
    FOR UPDATE OF g SKIP LOCKED
    ) b
    LIMIT 500
        ) a
    ) c
),
-- Groups another claim held, which this one passed over: counted only when it found
-- fewer groups than it asked for (then the groups behind the held ones ran out, and the
-- worker claims again at once). The first ready groups under their caps by this
-- snapshot that this claim did not lock; one more look at the ready index, no lock.
busy AS (
    SELECT count(*)::integer AS n FROM (
        SELECT * FROM (
    SELECT g.grp
    FROM "billing_jobs".groups g
    CROSS JOIN LATERAL (
        SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                 WHERE x.kind = $2::text AND x.grp = g.grp) AS n
        FROM "billing_jobs".jobs c
        WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = g.grp) r
    WHERE g.kind = $2::text AND g.ready AND NOT g.paused AND (SELECT count(*) FROM ready) < $5::integer
      AND (coalesce(g.cap, $7::integer) IS NULL OR r.n < coalesce(g.cap, $7::integer))
      AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = $2::text)
    ORDER BY g.head, g.vtime
    LIMIT (SELECT $5::integer)
    ) b
    LIMIT 500
    ) b
    WHERE b.grp NOT IN (SELECT r.grp FROM ready r)
),
-- The groups first seen (no row in this snapshot) whose row lock (group_key) this claim
-- takes, and of them, as many as the batch, first by tier: this claim may take from
-- those. Their rows are inserted below (created), once the batch is known; a job of one
-- is claimed only if its row's insert is this claim's (one whose snapshot missed a row
-- committed since takes none of its jobs). A group whose lock another holds (a claim
-- inserting its row, a caller's set_group) is passed by: its wake-up stays due.
fresh AS (
    SELECT d.grp, d.priority FROM due_groups d
    WHERE CASE WHEN NOT EXISTS (SELECT 1 FROM "billing_jobs".groups e
                                WHERE e.kind = $2::text AND e.grp = d.grp)
               THEN pg_try_advisory_xact_lock(hashtextextended('venturi group "billing_jobs" ' || $2::text || E'\n' || d.grp, 0))
               ELSE false END
),
fresh_taking AS (
    SELECT f.grp, f.priority FROM fresh f
    ORDER BY f.priority, f.grp
    LIMIT (SELECT $5::integer)
),
-- The other groups with a wake-up, locked to apply it (not the ready ones taken above:
-- they are written below). A group that was idle starts at the least virtual time of
-- the ready groups (no banked credit). A group another claim holds keeps its wake-ups
-- for the next claim.
waking AS (
    SELECT g.grp, g.xmin AS newest, g.claims,
           CASE WHEN g.ready THEN g.vtime ELSE greatest(g.vtime, (SELECT v FROM restart)) END
               AS vtime,
           g.weight, g.cap, g.tokens, g.refilled_at, g.paused,
           CASE WHEN g.ready THEN least(g.head, d.priority) ELSE d.priority END AS head,
           g.ready AS was_ready
    FROM "billing_jobs".groups g
    JOIN due_groups d ON d.grp = g.grp
    WHERE g.kind = $2::text AND g.grp = ANY (ARRAY(SELECT e.grp FROM due_groups e))
      AND g.grp NOT IN (SELECT r.grp FROM ready r)
    FOR UPDATE OF g SKIP LOCKED
),
-- Of those, the ones this claim may take from, as many as the batch, first by tier and
-- virtual time: so that the claim that wakes an idle group can take its job (an idle
-- group's job would otherwise wait a claim more than a job without a group), while a
-- claim that wakes a thousand groups at once reads no more of them than it can use.
taking AS (
    SELECT w.grp FROM waking w
    WHERE NOT w.paused
    ORDER BY w.head, w.vtime
    LIMIT (SELECT $5::integer)
),
-- The rest are made ready for the next claims (a paused one is not).
woken AS (
    UPDATE "billing_jobs".groups g
    SET ready = NOT g.paused, head = w.head, vtime = w.vtime
    FROM waking w
    WHERE g.kind = $2::text
      AND g.grp = ANY (ARRAY(SELECT x.grp FROM waking x
                             WHERE x.grp NOT IN (SELECT t.grp FROM taking t)))
      AND g.grp = w.grp
    RETURNING g.grp, w.was_ready, g.ready
),
-- Every group this claim may take from: the ready ones it locked, the woken ones it
-- takes and the first-seen ones it takes (no row yet: no newest version, no claims, the
-- least virtual time), with the jobs of each claimed as this snapshot sees them, and
-- each one's tier before this claim (`prior_head`, never NULL: a ready group's head, a
-- woken group's with its wake-ups', a first-seen group's wake-ups').
candidates AS (
    SELECT r.grp, r.newest, r.claims, r.vtime, r.weight, r.cap, r.tokens, r.refilled_at,
           r.running,
           -- A reserved claim may not read the group's better tiers: a job of one whose
           -- wake-up this claim applies counts too (looked up at a raised floor only).
           CASE WHEN (SELECT $4::smallint) > 0
                THEN least(r.head, (SELECT d.priority FROM due_groups d WHERE d.grp = r.grp))
                ELSE r.head END AS prior_head,
           true AS was_ready
    FROM ready r
    UNION ALL
    SELECT w.grp, w.newest, w.claims, w.vtime, w.weight, w.cap, w.tokens, w.refilled_at,
           k.n, w.head, w.was_ready
    FROM waking w
    CROSS JOIN LATERAL (
        SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                 WHERE x.kind = $2::text AND x.grp = w.grp) AS n
        FROM "billing_jobs".jobs c
        WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = w.grp) k
    WHERE w.grp IN (SELECT t.grp FROM taking t)
    UNION ALL
    SELECT f.grp, NULL::xid, 0::bigint, (SELECT v FROM restart), NULL::float8,
           NULL::integer, NULL::float8, NULL::timestamptz, k.n, f.priority, false
    FROM fresh_taking f
    CROSS JOIN LATERAL (
        SELECT count(*)::integer - (SELECT count(*)::integer FROM completed x
                                 WHERE x.kind = $2::text AND x.grp = f.grp) AS n
        FROM "billing_jobs".jobs c
        WHERE c.status = 'claimed' AND c.kind = $2::text AND c.grp = f.grp) k
),
-- The candidates as this snapshot saw them: with the claims counted on the locked row,
-- what makes the cap exact, and whether anyone wrote the row since (docs/groups.md); a
-- first-seen group has no row here, and needs none (its jobs are taken only under its
-- insert, below, and no claim could take from it before). By
-- the primary key: the candidates' names as a list (joined with the CTE alone, the
-- planner expects 200 rows and hashes a scan of every group of the kind: 15 ms at 10,000
-- groups, benchmarks/JOURNAL.md, the groups scenario).
seen AS (
    SELECT g.grp, g.xmin AS seen, g.claims FROM "billing_jobs".groups g
    WHERE g.kind = $2::text AND g.grp = ANY (ARRAY(SELECT c.grp FROM candidates c))
),
locked AS (
    SELECT r.grp, r.newest IS NULL OR n.seen = r.newest AS unchanged, r.vtime,
           -- numeric, as vtime is: a step of 1e-6 is lost in float8 at a large time.
           coalesce(r.weight, 1)::numeric AS weight,
           r.running + coalesce(r.claims - n.claims, 0) AS running,
           coalesce(r.cap, $7::integer) AS cap, r.prior_head, r.was_ready,
           CASE WHEN (SELECT $8::float8) IS NOT NULL THEN
               least($9::integer, coalesce(r.tokens, $9::integer)
                     + greatest(0, extract(epoch FROM (SELECT k.at FROM clock k) - coalesce(r.refilled_at, (SELECT k.at FROM clock k))))
                       * $8::float8)
           END AS tokens
    FROM candidates r LEFT JOIN seen n ON n.grp = r.grp
),
room AS (
    SELECT l.*, greatest(0, least((SELECT $5::integer), 100,
                                  coalesce(l.cap - l.running, $5::integer),
                                  coalesce(floor(l.tokens)::integer, $5::integer))) AS room
    FROM locked l
),
-- Each group's next jobs in its order, one more than it may give (to know whether work
-- is left), tagged with the virtual time each would bring the group to. The floor's
-- tiers first, as across groups: a claim reserved for the lower tiers takes them from a
-- group whose first job is of a higher tier too (ordered by tier alone, a tenant's
-- steady HIGH jobs hid its LOW ones from every reserved claim). At floor 0 (most
-- claims) the first scan is the group's order and the second is not run (a one-time
-- filter: an empty look at the index cost a group two buffers, benchmarks/JOURNAL.md).
picks AS (
    SELECT r.grp, p.id, p.priority, p.n, r.room, r.vtime + p.n / r.weight AS tag
    FROM room r
    CROSS JOIN LATERAL (
        SELECT q.id, q.priority, row_number() OVER () AS n FROM (
            SELECT * FROM (
                (SELECT j.id, j.priority FROM "billing_jobs".jobs j
                 WHERE j.status = 'pending' AND j.visible_at <= (SELECT k.at FROM clock k) AND j.kind = $2::text AND j.grp = r.grp
                   AND j.priority >= $4::smallint
                 ORDER BY j.priority, j.rank, j.created_at, j.id
                 LIMIT r.room + 1)
                UNION ALL
                (SELECT j.id, j.priority FROM "billing_jobs".jobs j
                 WHERE j.status = 'pending' AND j.visible_at <= (SELECT k.at FROM clock k) AND j.kind = $2::text AND j.grp = r.grp
                   AND j.priority < $4::smallint AND (SELECT $4::smallint) > 0
                 ORDER BY j.priority, j.rank, j.created_at, j.id
                 LIMIT r.room + 1)
                -- Of both: the second scan runs only when the first found too few.
                LIMIT r.room + 1
            ) o
            -- The planner's bound (room is at most JOB_BOUND).
            LIMIT 101
        ) q
    ) p
),
-- The batch: the floor's tiers first, then by tier, then the least virtual time (weighted
-- fair share); with a global cap, within the room the kind has left.
chosen AS (
    SELECT p.id FROM picks p
    WHERE p.n <= p.room
    ORDER BY (p.priority >= $4::smallint) DESC, p.priority, p.tag, p.id
    LIMIT (SELECT CASE WHEN (SELECT $10::integer) IS NULL THEN $5::integer
                       ELSE greatest(0, least($5::integer, $10::integer - (
                           SELECT count(*)::integer FROM "billing_jobs".jobs k
WHERE k.status = 'claimed' AND k.kind = $2::text
  AND k.id NOT IN (SELECT c.id FROM completed c)))) END)
),
-- A row an operator's transaction holds is left for the next claim.
lockable AS (
    SELECT j.id, j.grp FROM "billing_jobs".jobs j
    WHERE j.id = ANY (ARRAY(SELECT c.id FROM chosen c)) AND j.status = 'pending'
    FOR UPDATE SKIP LOCKED
),
-- Per group, in one pass over its picks (a job to claim is one of them): the jobs it
-- gives, the jobs found, and the tier of the first it keeps. One hash join and one
-- aggregate: a sub-select per group and per figure scanned the CTEs once each (about a
-- third of the statement's time at 32 groups: benchmarks/JOURNAL.md).
per_group AS (
    SELECT p.grp, count(c.id)::integer AS n, count(*)::integer AS found,
           min(p.priority) FILTER (WHERE c.id IS NULL) AS next_head,
           -- The first scan filled the picks: the group's tiers above the floor unread.
           count(*) FILTER (WHERE p.priority >= $4::smallint) > min(p.room) AS above_unread
    FROM picks p LEFT JOIN lockable c ON c.id = p.id
    GROUP BY p.grp
),
tally AS (
    SELECT r.grp, r.vtime, r.weight, r.tokens, r.room, r.unchanged, r.prior_head, r.was_ready,
           coalesce(t.n, 0) AS n, coalesce(t.found, 0) AS found, t.next_head,
           coalesce(t.above_unread, false) AS above_unread
    FROM room r LEFT JOIN per_group t ON t.grp = r.grp
),
states AS (
    SELECT t.*,
           -- The group's virtual time and tokens once this claim commits (written and
           -- created write them; tokens NULL: no bucket).
           t.vtime + t.n / t.weight AS after_vtime, t.tokens - t.n AS after_tokens,
           -- No visible job left: it gave all it found, and found fewer than it could take.
           t.n = t.found AND t.found <= t.room AS exhausted,
           t.tokens IS NOT NULL AND t.tokens - t.n < 1 AS out_of_tokens
    FROM tally t
),
outcome AS (
    SELECT s.*,
           -- Parked (out of the ready groups), exhausted or out of tokens, only if nobody
           -- wrote the row since the snapshot, which saw every job whose wake-up this or
           -- an earlier claim used.
           s.unchanged AND (s.exhausted OR s.out_of_tokens) AS park,
           -- Parked for want of a token only: it wakes when its next token is due.
           s.out_of_tokens AND NOT s.exhausted AS dry
    FROM states s
),
-- The rows of the groups first seen, under their row locks (fresh): those taken from as
-- the claim leaves them (as written below leaves the others'), the rest ready, at the
-- least virtual time, for the next claims. The row is new: nobody wrote it since the
-- snapshot. One committed since (a set_group's) is left as it is (DO NOTHING): only a
-- claim that locked it since may still be writing it, and the insert waits for that one
-- alone; in one order, so that such waits never form a cycle.
created AS (
    INSERT INTO "billing_jobs".groups AS g (kind, grp, ready, head, vtime, claims, tokens,
                                     refilled_at, token_at, task_cap, minute, minute_claims)
    SELECT $2::text, f.grp, coalesce(NOT o.park, true),
           least(coalesce(o.next_head, f.priority),
      CASE WHEN o.above_unread AND f.priority < $4::smallint THEN f.priority END),
           coalesce(o.after_vtime, (SELECT v FROM restart)),
           coalesce(o.n, 0), o.after_tokens,
           CASE WHEN o.tokens IS NOT NULL THEN (SELECT k.at FROM clock k) END,
           CASE WHEN o.tokens IS NOT NULL THEN
    (SELECT k.at FROM clock k)
      + make_interval(secs => greatest(0, 1 - o.after_tokens) / $8::float8) END,
           CASE WHEN o.grp IS NOT NULL THEN $7::integer END,
           CASE WHEN o.grp IS NOT NULL THEN date_trunc('minute', now()) END,
           coalesce(o.n, 0)
    FROM fresh f
    LEFT JOIN outcome o ON o.grp = f.grp
    ORDER BY f.grp
    ON CONFLICT (kind, grp) DO NOTHING
    RETURNING g.grp
),
-- The jobs claimed: a first-seen group's only where its row is this claim's.
claimed AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'claimed',
        claimed_by = $1::text,
        claim_token = $6::uuid,
        claimed_at = now(),
        attempt = j.attempt + 1,
        claim_expires_at = now() + make_interval(secs => $3::float8)
    WHERE j.id = ANY (ARRAY(SELECT l.id FROM lockable l
                            WHERE l.grp NOT IN (SELECT t.grp FROM fresh_taking t)
                               OR l.grp IN (SELECT c.grp FROM created c)))
      AND (SELECT CASE WHEN $11::boolean THEN true
             ELSE set_config('synchronous_commit', 'off', true) = 'off' END)
    RETURNING j.id, j.kind, j.priority, j.carry::text AS carry, j.attempt,
              j.failures, (extract(epoch FROM j.created_at) * 1000000)::bigint AS created_us,
              extract(epoch FROM now() - j.visible_at)::float8 AS waited,
              j.traceparent, j.grp
),
written AS (
    UPDATE "billing_jobs".groups g
    SET vtime = o.after_vtime,
        claims = g.claims + o.n,
        tokens = CASE WHEN o.tokens IS NULL THEN g.tokens ELSE o.after_tokens END,
        refilled_at = CASE WHEN o.tokens IS NULL THEN g.refilled_at ELSE (SELECT k.at FROM clock k) END,
        token_at = CASE WHEN o.tokens IS NOT NULL THEN
    (SELECT k.at FROM clock k)
      + make_interval(secs => greatest(0, 1 - o.after_tokens) / $8::float8) END,
        ready = NOT o.park,
        head = least(coalesce(o.next_head, o.prior_head),
      CASE WHEN o.above_unread AND o.prior_head < $4::smallint THEN o.prior_head END),
        task_cap = $7::integer,
        minute = date_trunc('minute', now()),
        last_minute_claims = CASE
            WHEN g.minute = date_trunc('minute', now()) THEN g.last_minute_claims
            WHEN g.minute = date_trunc('minute', now()) - interval '1 minute' THEN g.minute_claims
            ELSE 0 END,
        minute_claims = CASE WHEN g.minute = date_trunc('minute', now()) THEN g.minute_claims
                             ELSE 0 END + o.n
    FROM outcome o
    -- By the primary key, as locked: not a hash of every group.
    WHERE g.kind = $2::text AND g.grp = ANY (ARRAY(SELECT x.grp FROM outcome x))
      AND g.grp = o.grp
    RETURNING g.grp
),
-- A group parked for want of tokens wakes when its next token is due, at this claim's
-- rate (kept: a worker of a faster one moves the wake-up forward, group_refill_advance),
-- unless a token wake-up for that time, of the group's tier or a better one, is there
-- already: a job enqueued into a group out of tokens wakes it, and the claim that parks
-- it again computes the same time (one wake-up each time before: 29 after 30 jobs). One
-- this snapshot sees and not yet due is still there: the group is parked only if no
-- claim wrote its row since the snapshot, only a claim that writes the row deletes its
-- wake-ups, and this claim deletes only due ones. By group_wakes_due_idx, a millisecond
-- of wake-ups (the time is recomputed in float8 from the bucket's state).
refill AS (
    INSERT INTO "billing_jobs".group_wakes (kind, grp, at, priority, rate)
    SELECT $2::text, o.grp, o.token_at, o.head, $8::float8
    FROM (SELECT o.*, CASE WHEN o.tokens IS NOT NULL THEN
                         (SELECT k.at FROM clock k)
                           + make_interval(secs => greatest(0, 1 - o.after_tokens) / $8::float8) END AS token_at,
                 least(coalesce(o.next_head, o.prior_head),
                       CASE WHEN o.above_unread AND o.prior_head < $4::smallint THEN o.prior_head END) AS head
          FROM outcome o WHERE o.park AND o.dry) o
    WHERE NOT EXISTS (
        SELECT 1 FROM "billing_jobs".group_wakes w
        WHERE w.kind = $2::text
          AND w.at BETWEEN o.token_at - interval '1 ms' AND o.token_at + interval '1 ms'
          AND w.at > (SELECT k.at FROM clock k)
          AND w.grp = o.grp AND w.rate IS NOT NULL AND w.priority <= o.head)
    RETURNING grp
),
-- The wake-ups applied: those of the groups created, woken or claimed from here.
applied AS (
    DELETE FROM "billing_jobs".group_wakes w
    USING due d
    WHERE w.id = d.id
      AND (d.grp IN (SELECT c.grp FROM created c)
           OR d.grp IN (SELECT k.grp FROM woken k)
           OR d.grp IN (SELECT o.grp FROM written o))
    RETURNING w.id
),
-- The due wake-ups of the groups this claim passed over (another claim's, a caller's
-- set_group in an open transaction): folded into one a group, of their best tier (still
-- due), which the group's next claim applies. A group held long, whose jobs each wrote a
-- wake-up, filled the 1,000 that `due` reads with its own, and no claim read past them:
-- every group of the kind that was not ready already waited for that transaction.
folded AS (
    DELETE FROM "billing_jobs".group_wakes w
    USING (SELECT d.id, row_number() OVER (PARTITION BY d.grp ORDER BY d.priority, d.id) AS n
           FROM due d
           WHERE d.grp NOT IN (SELECT c.grp FROM created c)
             AND d.grp NOT IN (SELECT k.grp FROM woken k)
             AND d.grp NOT IN (SELECT o.grp FROM written o)) x
    WHERE w.id = x.id AND x.n > 1
    RETURNING w.id
)
-- (refill, applied and folded write; PostgreSQL runs a data-modifying CTE whether or not
-- it is read.)
SELECT false AS lost, id, kind, priority, carry, attempt, failures, created_us, waited,
       traceparent, grp,
       NULL::integer AS held, NULL::integer AS woken, NULL::integer AS busy,
       NULL::integer AS parked, NULL::float8 AS next_wake
FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       CASE WHEN (SELECT $10::integer) IS NULL THEN NULL ELSE (
           SELECT count(*)::integer FROM "billing_jobs".jobs k
WHERE k.status = 'claimed' AND k.kind = $2::text
  AND k.id NOT IN (SELECT c.id FROM completed c)) + (SELECT count(*)::integer FROM claimed) END,
       (SELECT count(*)::integer FROM created c
        WHERE c.grp NOT IN (SELECT t.grp FROM fresh_taking t))
         + (SELECT count(*)::integer FROM woken k WHERE NOT k.was_ready AND k.ready)
         + (SELECT count(*)::integer FROM outcome o WHERE NOT o.was_ready AND o.n = 0
            AND NOT o.park),
       -- (and one more when the claim stopped at a bound: a claim of more than
       -- GROUP_BOUND that locked as many groups, or a group that gave JOB_BOUND jobs and
       -- has more)
       (SELECT b.n FROM busy b)
         + CASE WHEN ((SELECT $5::integer) > 500
                      AND (SELECT count(*) FROM ready) >= 500)
                  OR EXISTS (SELECT 1 FROM outcome o
                             WHERE o.n >= 100 AND NOT o.exhausted)
                THEN 1 ELSE 0 END,
       (SELECT count(*)::integer FROM outcome o WHERE o.park),
       CASE WHEN NOT EXISTS (SELECT 1 FROM claimed) THEN (
           SELECT extract(epoch FROM w.at - (SELECT k.at FROM clock k))::float8 FROM "billing_jobs".group_wakes w
           WHERE w.kind = $2::text AND w.at > (SELECT k.at FROM clock k)
           ORDER BY w.at
           LIMIT 1) END
UNION ALL
SELECT true, d.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL
FROM unnest((SELECT $12::bigint[])) AS d(id)
WHERE d.id NOT IN (SELECT id FROM completed);

-- job_claim_one: claim the first eligible job, in job_claim's order, with nothing riding
-- the claim: the claim of a worker that has no completions to carry and no tier to
-- reserve, which is what an idle worker woken by a notification sends (a pickup). It
-- claims what job_claim with $5 = 1, no completions and floor 0 claims, in a plan a third
-- the size: the job's id from a scalar sub-select, the row by the primary key, no
-- data-modifying CTE to start and finish. After an idle pause, when the server's backend
-- and its caches are cold, that is 0.58 ms against job_claim's 0.73 (p50, one job;
-- benchmarks/JOURNAL.md, "the idle worker's claim"). A worker whose claim came back full
-- (a backlog) uses job_claim, which takes a batch. Its row says whether more are there.
-- $1 text claimed_by: identity stamped on the claimed row (host:pid), for diagnostics
-- $2 text[] kinds: the claim filter (registered kinds minus those at their cap)
-- $3 float8[] leases: lease in seconds of each kind in $2, same order
-- $4 uuid claim_token: this worker run's ownership token, stamped on the claim
-- $5 boolean synchronous_commit: false commits without waiting for the WAL flush
-- index: jobs_claim_idx (as job_claim, and for `more`); the primary key for the claimed row.
PREPARE billing_jobs_job_claim_one(text, text[], float8[], uuid, boolean) AS
UPDATE "billing_jobs".jobs j
SET status = 'claimed',
        claimed_by = $1,
        claim_token = $4::uuid,
        claimed_at = now(),
        attempt = j.attempt + 1,
        claim_expires_at = now() + make_interval(secs => lease.seconds)
FROM unnest((SELECT $2::text[]), (SELECT $3::float8[])) AS lease(kind, seconds)
WHERE j.id = (
    SELECT c.id FROM "billing_jobs".jobs c
    WHERE c.status = 'pending' AND c.visible_at <= now()
      AND c.grp IS NULL
      AND c.kind = ANY (ARRAY(
          SELECT k FROM unnest($2::text[]) AS k
          WHERE NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = k)))
    ORDER BY c.priority, c.rank, c.created_at, c.id
    -- A constant: the planner sees one row, whatever the table's statistics.
    LIMIT 1
    -- Concurrent claims take distinct rows without waiting on each other.
    FOR UPDATE SKIP LOCKED)
  AND lease.kind = j.kind
  AND (SELECT CASE WHEN $5::boolean THEN true
             ELSE set_config('synchronous_commit', 'off', true) = 'off' END)
RETURNING j.id, j.kind, j.priority, j.carry::text AS carry, j.attempt,
              j.failures, (extract(epoch FROM j.created_at) * 1000000)::bigint AS created_us,
              extract(epoch FROM now() - j.visible_at)::float8 AS waited,
              j.traceparent, j.grp,
    -- Whether another job is there to claim (this statement's snapshot still sees the
    -- claimed row pending: it is left out; rows other claims hold count). Without one
    -- the worker claims no more until the next notification, which spares a trickle's
    -- job a batch claim that would find nothing; with one it claims the rest of its
    -- slots in a batch. Read as the claim reads: an EXISTS without the order was
    -- planned as a sequential scan when every row matches (one kind), which reads past
    -- every finished row at the head of the table.
    coalesce((SELECT true FROM "billing_jobs".jobs m
              WHERE m.status = 'pending' AND m.visible_at <= now()
      AND m.grp IS NULL
      AND m.kind = ANY (ARRAY(
          SELECT k FROM unnest($2::text[]) AS k
          WHERE NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = k))) AND m.id <> j.id
              ORDER BY m.priority, m.rank, m.created_at, m.id
              LIMIT 1), false) AS more;

-- job_complete_many_if_owned: settle finished jobs as completed, only where this worker
-- still holds the same claim; returns the ids it settled (a missing id lost its claim).
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint[] ids: the jobs
-- $3 integer[] attempts: the claim (attempt number) each job was run under
-- $4 text[] results: msgspec-encoded JSON result of each job (NULL: none)
-- $5 boolean synchronous_commit: false commits without waiting for the WAL flush
-- (_commit_mode.sql.j2; true inside a handler's own transaction, which it must not change)
-- index: primary key. No journal row: completion is read off the row, so the common path
-- writes one row.
PREPARE billing_jobs_job_complete_many_if_owned(uuid, bigint[], integer[], text[], boolean) AS
UPDATE "billing_jobs".jobs j
SET status = 'completed',
    finished_at = now(),
    claim_expires_at = NULL, claim_token = NULL,
    result = done.result::jsonb
FROM unnest($2::bigint[], $3::integer[], $4::text[]) AS done(id, attempt, result)
WHERE j.id = done.id
  -- The ownership guard (statements/_owned.sql.j2): a reclaimed job (new attempt or
  -- new owner) is left alone.
  AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = done.attempt
  AND (SELECT CASE WHEN $5::boolean THEN true
             ELSE set_config('synchronous_commit', 'off', true) = 'off' END)
RETURNING j.id;

-- job_completed_at_attempt: of a worker's queued completions, those already written: sent
-- by a statement that failed (a claim they rode, whose answer was lost with its
-- connection after it committed), they are completed at the attempt the worker ran. A
-- completion clears the claim token, so the re-sent one would match nothing and read as a
-- claim lost to another worker; another worker's run of the job would have claimed it
-- under a new attempt.
-- $1 bigint[] ids: the jobs
-- $2 integer[] attempts: the attempt each was run under
-- index: primary keys of jobs and jobs_history (through all_jobs); read after a
-- database error only.
PREPARE billing_jobs_job_completed_at_attempt(bigint[], integer[]) AS
SELECT a.id
FROM unnest($1::bigint[], $2::integer[]) AS q(id, attempt)
JOIN "billing_jobs".all_jobs a ON a.id = q.id AND a.attempt = q.attempt
WHERE a.status = 'completed';

-- job_count_matching: how many jobs a filter matches up to an id, and the newest of them:
-- what a bulk action asks the operator to confirm, and where it starts.
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text grp: only jobs of this group (NULL: any; jobs_grp_id_idx and the history's)
-- index: jobs_kind_id_idx, jobs_failed_id_idx, jobs_key_search_idx, the partial indexes of
-- pending and claimed jobs; a filter on completed jobs alone counts them all (once, on
-- the confirmation page).
PREPARE billing_jobs_job_count_matching(text, text, text, text) AS
SELECT count(*) AS jobs, max(id) AS newest_id
FROM "billing_jobs".all_jobs
WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR kind = $2::text)
  AND ($3::text IS NULL OR key = $3::text)
  AND ($4::text IS NULL OR grp = $4::text);

-- job_count_matching_search: job_count_matching with a search (a bulk action on the
-- dashboard's searched list): how many jobs match, and the newest of them. Exact.
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- index: as job_search_text_count, each arm read to its end.
PREPARE billing_jobs_job_count_matching_search(text, text, text, text, text[], text[], timestamptz, bigint, text) AS
SELECT count(*) AS jobs, max(id) AS newest_id
FROM (
    SELECT j.id
    FROM "billing_jobs".all_jobs j
    WHERE j.kind = ANY ($5::text[])
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    UNION ALL
    SELECT j.id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      AND x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
      AND j.kind <> ALL ($5::text[])
    UNION ALL
    SELECT j.id
    FROM "billing_jobs".all_jobs j
    WHERE $4::text IS NOT NULL
      AND ((j.status = 'pending' AND j.grp IS NULL)
         OR (j.status = 'pending' AND j.grp IS NOT NULL) OR j.status = 'claimed' OR j.status = 'waiting'
         OR (j.status IN ('completed', 'dead', 'cancelled')
             AND j.finished_at >= $7::timestamptz
             AND (j.finished_at > $7::timestamptz OR j.id > $8::bigint)))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
      AND j.kind <> ALL ($5::text[])
      -- A word's pattern first (a lower() and a LIKE), the document only where it passes.
      AND lower(j.kind || ' ' || coalesce(j.key, '') || ' '
            || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000)) LIKE ALL ($6::text[])
      AND to_tsvector('simple'::regconfig, j.kind || ' ' || coalesce(j.key, '') || ' '
      || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000)) @@ $4::text::tsquery

) AS matched;

-- job_counts: how many jobs of each kind are in each status (the demo's summary, stats).
-- $1 bigint[] ids: only these jobs (NULL: every job)
-- index: primary key for $1; otherwise a sequential scan, meant for operators.
PREPARE billing_jobs_job_counts(bigint[]) AS
SELECT kind, status, count(*) AS jobs
FROM "billing_jobs".all_jobs
WHERE $1::bigint[] IS NULL OR id = ANY($1)
GROUP BY kind, status
ORDER BY kind, status;

-- job_dead_if_owned: settle straight to dead (the handler returned dead, or its carry no
-- longer decodes); not counted as a failure.
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text reason: why, kept as last_error
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_dead_if_owned(uuid, bigint, integer, text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'dead', finished_at = now(), claim_expires_at = NULL, claim_token = NULL,
        last_error = $4
    WHERE j.id = $2 AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at, j.claimed_by
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'dead', attempt, claimed_by, $4 FROM settled
)
SELECT id FROM settled;

-- job_delete_many_if_not_claimed: an operator's delete: jobs that no worker holds are
-- deleted, with their journal, steps, signals and search document, from the live table
-- or the history. A claimed job is refused (cancel it first): its worker would settle a
-- row that is gone. Returns one row per distinct
-- input id with its status before and whether it was deleted.
-- $1 bigint[] ids: the jobs to delete
-- index: primary keys (jobs, jobs_history); journal_job_idx; job_search_pkey.
PREPARE billing_jobs_job_delete_many_if_not_claimed(bigint[]) AS
WITH input AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
),
deleted_live AS (
    DELETE FROM "billing_jobs".jobs j
    USING input
    WHERE j.id = input.id AND j.status <> 'claimed'
    RETURNING j.id
),
deleted_history AS (
    DELETE FROM "billing_jobs".jobs_history h
    USING input
    WHERE h.id = input.id
    RETURNING h.id
),
deleted AS (
    SELECT id FROM deleted_live UNION ALL SELECT id FROM deleted_history
),
unjournaled AS (
    DELETE FROM "billing_jobs".journal l USING deleted WHERE l.job_id = deleted.id
),
unstepped AS (
    DELETE FROM "billing_jobs".steps st USING deleted WHERE st.job_id = deleted.id
),
unsignalled AS (
    DELETE FROM "billing_jobs".signals sg USING deleted WHERE sg.job_id = deleted.id
),
unlinked AS (
    DELETE FROM "billing_jobs".dependencies d USING deleted WHERE d.job_id = deleted.id
),
unindexed AS (
    DELETE FROM "billing_jobs".job_search x USING deleted WHERE x.job_id = deleted.id
)
SELECT input.id, j.kind, j.status AS was, d.id IS NOT NULL AS deleted
FROM input
LEFT JOIN "billing_jobs".all_jobs j ON j.id = input.id
LEFT JOIN deleted d ON d.id = input.id
ORDER BY input.id;

-- job_due_count: jobs of these kinds still to run now or very soon: pending and visible
-- within the horizon, or claimed by the given worker (`venturi.testing.drain` stops its
-- worker when this reaches zero; the horizon lets a short retry's delay end during it).
-- $1 text[] kinds: the kinds being drained
-- $2 text claimed_by: the draining worker's identity
-- $3 float8 horizon: seconds ahead a pending job still counts as due
-- index: jobs_claim_idx, jobs_group_claim_idx and jobs_stale_idx (partial), filtered by kind.
PREPARE billing_jobs_job_due_count(text[], text, float8) AS
SELECT count(*) AS jobs FROM "billing_jobs".jobs
WHERE kind = ANY($1::text[])
  -- clock_timestamp(), not now(): this statement's transaction can start before a
  -- concurrent pause that commits before its snapshot, stamping visible_at after now().
  AND ((((jobs.status = 'pending' AND jobs.grp IS NULL)
   OR (jobs.status = 'pending' AND jobs.grp IS NOT NULL))
        AND visible_at <= clock_timestamp() + make_interval(secs => $3::float8))
       OR (status = 'claimed' AND claimed_by = $2::text));

-- job_fail_if_owned: settle a failed execution (a raised exception, a retry outcome, a
-- timeout): failures + 1, then pending after the delay, or dead at the backstop.
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text event: 'failed', 'retried' or 'timed-out'
-- $5 text error: what went wrong (message and traceback), kept as last_error
-- $6 text carry: the carry to keep (NULL: keep the pre-run carry)
-- $7 float8 delay: seconds before the job is visible again
-- $8 boolean force_dead: settle dead now (failures_to_dead, retry_on) instead of retrying
-- $9 text dead_reason: the dead entry's detail when $8 (NULL: the failures_to_dead one)
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_fail_if_owned(uuid, bigint, integer, text, text, text, float8, boolean, text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET failures = j.failures + 1,
        status = CASE WHEN $8 OR j.failures + 1 >= j.max_failures THEN 'dead'
                      -- An operator's cancel request outranks a retry.
                      WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      ELSE 'pending' END,
        finished_at = CASE WHEN $8 OR j.failures + 1 >= j.max_failures
                             OR j.cancel_requested_at IS NOT NULL THEN now() END,
        carry = coalesce($6::jsonb, j.carry),
        visible_at = now() + make_interval(secs => $7::float8),
        claim_expires_at = NULL, claim_token = NULL,
        last_error = $5
    WHERE j.id = $2 AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = $3
    RETURNING j.id, j.status, j.attempt, j.failures, j.max_failures, j.claimed_at, j.claimed_by
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), $4, attempt, claimed_by, $5 FROM settled
    UNION ALL
    SELECT id, now(), 'dead', attempt, claimed_by,
           CASE WHEN $8 THEN coalesce($9::text, 'failures_to_dead: a failed execution settles dead')
                ELSE 'failure backstop reached (' || failures || ' of ' || max_failures || ')'
           END
    FROM settled WHERE status = 'dead'
    UNION ALL
    SELECT id, now(), 'cancelled', attempt, claimed_by, 'cancelled by an operator; not retried'
    FROM settled WHERE status = 'cancelled'
)
SELECT id, status FROM settled;

-- job_get: one job's row, with JSON columns as text for the caller's decoder.
-- $1 bigint id: the job
-- index: primary key.
PREPARE billing_jobs_job_get(bigint) AS
SELECT id, kind, status, priority, carry::text AS carry, key, attempt, failures,
       max_failures, created_at, visible_at, claimed_at, claimed_by, claim_expires_at,
       finished_at, result::text AS result, last_error, cancel_requested_at, grp
FROM "billing_jobs".all_jobs
WHERE id = $1;

-- job_get_with_journal: one job's row and its written journal in one statement, so both
-- come from one snapshot (two statements could see a settlement between them: a job
-- dead without its failure, or the reverse). One row per journal entry, oldest first,
-- each with the job's columns; a job without entries is one row whose entry columns are
-- NULL; no row: no such job. JSON columns as text for the caller's decoder.
-- $1 bigint id: the job
-- index: primary key; journal_job_idx for the entries.
PREPARE billing_jobs_job_get_with_journal(bigint) AS
SELECT j.id, j.kind, j.status, j.priority, j.carry::text AS carry, j.key, j.attempt,
       j.failures, j.max_failures, j.created_at, j.visible_at, j.claimed_at, j.claimed_by,
       j.claim_expires_at, j.finished_at, j.result::text AS result, j.last_error,
       j.cancel_requested_at, j.grp,
       l.at AS entry_at, l.event AS entry_event, l.attempt AS entry_attempt,
       l.worker AS entry_worker, l.detail AS entry_detail
FROM "billing_jobs".all_jobs j
LEFT JOIN "billing_jobs".journal l ON l.job_id = j.id
WHERE j.id = $1
ORDER BY l.at, l.id;

-- job_heartbeat_if_owned: for the jobs a worker is running, extend the leases that are
-- due for renewal (only where it still holds the claim) and report, for each, whether it
-- still holds the claim and whether an operator asked to cancel it.
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint[] ids: the running jobs
-- $3 integer[] attempts: the claim (attempt) each runs under
-- $4 float8[] leases: new lease in seconds from now, or NULL to leave the lease alone
-- index: primary key.
PREPARE billing_jobs_job_heartbeat_if_owned(uuid, bigint[], integer[], float8[]) AS
WITH beat AS (
    SELECT * FROM unnest($2::bigint[], $3::integer[], $4::float8[]) AS b(id, attempt, lease)
),
renewed AS (
    UPDATE "billing_jobs".jobs j
    SET claim_expires_at = now() + make_interval(secs => beat.lease)
    FROM beat
    WHERE j.id = beat.id AND beat.lease IS NOT NULL
      -- Renewal extends only its own claim: a recovered or reclaimed job is left alone
      -- (the ownership guard: statements/_owned.sql.j2).
      AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = beat.attempt
    RETURNING j.id, j.attempt
)
-- Each answer names its claim (id and attempt): a worker may hold a job's new claim beside
-- the zombie run of its recovered one, and must not stop the one for the other.
SELECT beat.id, beat.attempt,
       coalesce(j.status = 'claimed' AND j.claim_token = $1::uuid AND j.attempt = beat.attempt,
                false) AS owned,
       j.cancel_requested_at IS NOT NULL AS cancel_requested,
       renewed.id IS NOT NULL AS renewed
FROM beat
LEFT JOIN "billing_jobs".all_jobs j ON j.id = beat.id
LEFT JOIN renewed ON renewed.id = beat.id AND renewed.attempt = beat.attempt;

-- job_history_move: move up to $2 jobs that finished more than $1 seconds ago from the
-- live table to the history (venturi.maintenance.History), in one statement: deleted
-- there and inserted here as they are, so every read through all_jobs sees each once.
-- Returns how many it moved; the caller repeats until a batch comes back short, each
-- batch its own short transaction (row locks on the moved rows only: the worker's claims
-- and settlements of other rows go on beside it).
-- $1 float8 after: seconds since finished_at before a job moves
-- $2 integer batch: most rows to move in this statement
-- index: jobs_finished_idx (finished rows only; the live rows never enter it).
PREPARE billing_jobs_job_history_move(float8, integer) AS
WITH moving AS (
    SELECT j.id FROM "billing_jobs".jobs j
    WHERE j.finished_at IS NOT NULL
      AND j.status IN ('completed', 'dead', 'cancelled')
      AND j.finished_at < now() - make_interval(secs => $1::float8)
    LIMIT $2::integer
    -- An operator retrying or deleting one of these right now keeps it for this time.
    FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM "billing_jobs".jobs j USING moving WHERE j.id = moving.id RETURNING j.*
),
kept AS (
    INSERT INTO "billing_jobs".jobs_history SELECT * FROM moved
)
SELECT count(*)::integer AS moved FROM moved;

-- job_ids_draw: the ids and the clock of a bulk enqueue by COPY (job_insert_many's copy
-- path): $1 fresh ids of the jobs table's identity, in ascending order, and the
-- transaction's now(), from which the rows' visible_at are computed exactly as
-- job_insert_many_unkeyed computes them (coalesce(at, now() + after)).
-- $1 integer count: how many ids
-- index: none; the identity's sequence only.
PREPARE billing_jobs_job_ids_draw(integer) AS
SELECT now() AS now,
       array(SELECT nextval(seq.name) FROM generate_series(1, $1::integer) AS g(i) ORDER BY g.i)
           AS ids
FROM (SELECT pg_get_serial_sequence('"billing_jobs".jobs', 'id') AS name) AS seq;

-- job_ids_matching: one batch of the ids of the jobs a filter matches, newest first, for
-- the dashboard's bulk actions (which then act on these ids by the single-job statements).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 bigint before_id: only smaller ids: the cursor, first the newest id the operator saw
-- $5 integer max_rows: the batch size
-- $6 text grp: only jobs of this group (NULL: any; jobs_grp_id_idx and the history's)
-- index: as job_list (primary key, jobs_kind_id_idx, jobs_failed_id_idx,
-- jobs_key_search_idx).
PREPARE billing_jobs_job_ids_matching(text, text, text, bigint, integer, text) AS
SELECT id
FROM "billing_jobs".all_jobs
WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR kind = $2::text)
  AND ($3::text IS NULL OR key = $3::text)
  AND id < $4::bigint
  AND ($6::text IS NULL OR grp = $6::text)
ORDER BY id DESC
LIMIT $5::integer;

-- job_ids_matching_search: job_ids_matching with a search: one batch of the ids of the
-- jobs a filter and a search match, newest first, for a bulk action on the dashboard's
-- searched list.
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- $10 bigint before_id: only smaller ids: the cursor, first the newest id the operator saw
-- $11 integer max_rows: the batch size
-- index: as job_search_text_older.
PREPARE billing_jobs_job_ids_matching_search(text, text, text, text, text[], text[], timestamptz, bigint, text, bigint, integer) AS
WITH window_end AS (
    -- The first side row past the window (NULL: the window reaches the end).
    SELECT x.job_id
    FROM "billing_jobs".job_search x
    WHERE ($10::bigint IS NULL OR x.job_id < $10::bigint)
    ORDER BY x.job_id DESC
    OFFSET 20000
    LIMIT 1
),
known_kinds AS (
    SELECT j.id
    FROM "billing_jobs".all_jobs j
    WHERE j.kind = ANY ($5::text[])
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
      AND ($10::bigint IS NULL OR j.id < $10::bigint)
    ORDER BY j.id DESC
    LIMIT $11::integer
),
in_window AS MATERIALIZED (
    SELECT x.job_id AS id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      AND ($10::bigint IS NULL OR x.job_id < $10::bigint)
      AND ($10::bigint IS NULL OR j.id < $10::bigint)
      AND x.job_id > coalesce((SELECT job_id FROM window_end), -9223372036854775808)
      AND j.id > coalesce((SELECT job_id FROM window_end), -9223372036854775808)
      -- IS TRUE: not a GIN condition, so the window is read in order.
      AND (x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery) IS TRUE
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    ORDER BY x.job_id DESC
    LIMIT $11::integer
),
past_window AS (
    SELECT x.job_id AS id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      -- Read only when the window held less than a page.
      AND (SELECT count(*) FROM in_window) < $11::integer
      AND x.job_id <= (SELECT job_id FROM window_end)
      AND j.id <= (SELECT job_id FROM window_end)
      AND x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    -- "+ 0": sorted, not an ordered scan of the primary key (which, for a word that few
    -- jobs hold, reads them all).
    ORDER BY x.job_id + 0 DESC
    LIMIT $11::integer
),
not_indexed AS (
    SELECT u.id, u.kind
    FROM (
        SELECT j.id, j.kind, j.kind || ' ' || coalesce(j.key, '') || ' '
                           || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000) AS words
        FROM "billing_jobs".all_jobs j
        WHERE $4::text IS NOT NULL
          AND ((j.status = 'pending' AND j.grp IS NULL)
             OR (j.status = 'pending' AND j.grp IS NOT NULL) OR j.status = 'claimed' OR j.status = 'waiting'
             OR (j.status IN ('completed', 'dead', 'cancelled')
                 AND j.finished_at >= $7::timestamptz
                 AND (j.finished_at > $7::timestamptz OR j.id > $8::bigint)))
          AND ($1::text IS NULL OR j.status = $1::text)
          AND ($2::text IS NULL OR j.kind = $2::text)
          AND ($3::text IS NULL OR j.key = $3::text)
          AND ($9::text IS NULL OR j.grp = $9::text)
          AND ($10::bigint IS NULL OR j.id < $10::bigint)
          AND lower(j.kind || ' ' || coalesce(j.key, '') || ' '
                || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000)) LIKE ALL ($6::text[])
        ORDER BY j.id DESC
        -- OFFSET 0: sorted before the documents are computed, which stop at a page.
        OFFSET 0
    ) AS u
    WHERE to_tsvector('simple'::regconfig, u.words) @@ $4::text::tsquery
    LIMIT $11::integer
),
page AS (
    SELECT id FROM known_kinds
    UNION
    SELECT id FROM in_window
    UNION
    SELECT id FROM past_window
    UNION
    SELECT id FROM not_indexed
    ORDER BY id DESC
    LIMIT $11::integer
)
SELECT id FROM page ORDER BY id DESC;

-- job_insert: enqueue one job, or find the job that holds its key: the unfinished one, or
-- (with unique_for) one that finished less than unique_for seconds ago. With replace, a
-- pending holder takes this enqueue's carry, priority and visible time; a claimed or
-- finished holder is left alone. Returns the id and the outcome: inserted, replaced,
-- pending or claimed (the unfinished holder, left as it was), finished (a recent one).
-- $1 text kind: the task kind
-- $2 text carry: msgspec-encoded JSON, validated by the caller
-- $3 smallint priority: 0 HIGH, 1 NORMAL, 2 LOW
-- $4 timestamptz at: visible from this instant (NULL: use $5)
-- $5 float8 after: visible after this many seconds (NULL and $4 NULL: now)
-- $6 text key: de-duplication key (NULL: none)
-- $7 integer max_failures: the task's failure backstop
-- $8 float8 backoff_base: the task's declared Backoff, for recovery (NULL: none declared)
-- $9 float8 backoff_factor: its growth per failure
-- $10 float8 backoff_cap: its longest delay in seconds
-- $11 boolean backoff_jitter: whether it is half-jittered
-- $12 float8 unique_for: seconds a finished job still holds its key (NULL: none); kept
-- on the job, which retention keeps as long
-- $13 boolean replace: a pending holder takes $2, $3 and the visible time of $4/$5
-- $14 text traceparent: W3C trace context of the enqueuing span (NULL: none)
-- $15 text grp: the job's group (NULL: none; SPEC 13)
-- index: jobs_key_idx is the ON CONFLICT arbiter and finds the unfinished holder;
-- jobs_key_search_idx finds a recently finished one.
PREPARE billing_jobs_job_insert(text, text, smallint, timestamptz, float8, text, integer, float8, float8, float8, boolean, float8, boolean, text, text) AS
WITH recent AS (
    -- A finished job: in the history once the maintenance pass moved it.
    SELECT id FROM "billing_jobs".all_jobs
    WHERE $12::float8 IS NOT NULL AND $6::text IS NOT NULL AND key = $6 AND kind = $1
      AND finished_at > now() - make_interval(secs => $12::float8)
    ORDER BY finished_at DESC
    LIMIT 1
),
inserted AS (
    INSERT INTO "billing_jobs".jobs (kind, carry, priority, visible_at, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              traceparent, grp, unique_for)
    SELECT $1, $2::jsonb, $3::smallint,
           coalesce($4::timestamptz, now() + make_interval(secs => coalesce($5::float8, 0))),
           $6, $7::integer, $8::float8, $9::float8, $10::float8, $11::boolean, $14::text, $15::text,
           -- Kept on a keyed job only: retention holds it for the window (job_purge_batch).
           CASE WHEN $6::text IS NOT NULL THEN $12::float8 END
    WHERE NOT EXISTS (SELECT 1 FROM recent)
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed', 'waiting')
    DO NOTHING
    RETURNING id
),
-- Reached only on a key conflict. A conflicting row committed after this statement's
-- snapshot is invisible here; the caller then runs the statement again.
holder AS (
    SELECT id, status FROM "billing_jobs".jobs
    WHERE $6::text IS NOT NULL AND kind = $1 AND key = $6 AND status IN ('pending', 'claimed', 'waiting')
    LIMIT 1
),
replaced AS (
    -- A claim that locked the holder first wins: this waits for it, then finds the row
    -- claimed and leaves it alone.
    UPDATE "billing_jobs".jobs j
    SET carry = $2::jsonb, priority = $3::smallint,
        visible_at = coalesce($4::timestamptz,
                              now() + make_interval(secs => coalesce($5::float8, 0)))
    FROM holder
    WHERE $13::boolean AND j.id = holder.id AND j.status = 'pending'
      AND NOT EXISTS (SELECT 1 FROM inserted)
    RETURNING j.id
)
SELECT id, outcome FROM (
    SELECT id, 'inserted' AS outcome, 1 AS rank FROM inserted
    UNION ALL
    SELECT h.id, CASE WHEN r.id IS NOT NULL THEN 'replaced' ELSE h.status END, 2
    FROM holder h LEFT JOIN replaced r ON r.id = h.id
    UNION ALL
    SELECT id, 'finished', 3 FROM recent
) found
ORDER BY rank
LIMIT 1;

-- job_insert_many: enqueue many jobs in one statement; returns one id per input row, in
-- input order, with its outcome: inserted; batch (an earlier row of this batch holds the
-- key); replaced, pending or claimed (the key's unfinished holder, replaced when $13 and
-- pending); finished (with unique_for, a job of the key finished within it). The id is
-- NULL where the key's holder committed after this statement's snapshot (it waited on
-- the holder's transaction): the caller runs the statement again for those rows, in the
-- same transaction, and the next snapshot sees the holder.
-- $1 text[] kinds: the task kind of each row
-- $2 text[] carries: msgspec-encoded JSON of each row
-- $3 smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW
-- $4 timestamptz[] ats: visible from (NULL: use afters)
-- $5 float8[] afters: visible after seconds (NULL: now)
-- $6 text[] keys: de-duplication keys (NULL: none)
-- $7 integer[] max_failures: each task's failure backstop
-- $8 float8[] backoff_bases: each task's declared Backoff, for recovery (NULL: none)
-- $9 float8[] backoff_factors: its growth per failure
-- $10 float8[] backoff_caps: its longest delay in seconds
-- $11 boolean[] backoff_jitters: whether it is half-jittered
-- $12 float8[] unique_fors: seconds a finished job still holds the row's key (NULL: none);
-- kept on the job, which retention keeps as long
-- $13 boolean replace: a pending holder takes the row's carry, priority and visible time
-- (the caller sends each key once when it replaces)
-- $14 text traceparent: W3C trace context of the enqueuing span, for every row (NULL: none)
-- $15 text[] grps: each row's group (NULL: none; SPEC 13)
-- index: jobs_key_idx (arbiter and lookup of unfinished holders); jobs_key_search_idx
-- (recently finished holders).
PREPARE billing_jobs_job_insert_many(text[], text[], smallint[], timestamptz[], float8[], text[], integer[], float8[], float8[], float8[], boolean[], float8[], boolean, text, text[]) AS
WITH input AS (
    -- Ids are drawn up front so that each input row can be matched to what was inserted.
    SELECT nextval(pg_get_serial_sequence('"billing_jobs".jobs', 'id')) AS id, u.*
    FROM unnest($1::text[], $2::text[], $3::smallint[], $4::timestamptz[], $5::float8[],
                $6::text[], $7::integer[], $8::float8[], $9::float8[], $10::float8[],
                $11::boolean[], $12::float8[], $15::text[])
         WITH ORDINALITY AS u(kind, carry, priority, at, after, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              unique_for, grp, ord)
),
recent AS (
    SELECT DISTINCT ON (input.ord) input.ord, j.id
    FROM input
    -- A finished job: in the history once the maintenance pass moved it.
    JOIN "billing_jobs".all_jobs j
      ON input.key IS NOT NULL AND input.unique_for IS NOT NULL
     AND j.key = input.key AND j.kind = input.kind
     AND j.finished_at > now() - make_interval(secs => input.unique_for)
    ORDER BY input.ord, j.finished_at DESC
),
inserted AS (
    INSERT INTO "billing_jobs".jobs (id, kind, carry, priority, visible_at, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              traceparent, grp, unique_for)
    SELECT id, kind, carry::jsonb, priority,
           coalesce(at, now() + make_interval(secs => coalesce(after, 0))), key, max_failures,
           backoff_base, backoff_factor, backoff_cap, backoff_jitter, $14::text, grp,
           -- Kept on a keyed job only: retention holds it for the window (job_purge_batch).
           CASE WHEN key IS NOT NULL THEN unique_for END
    FROM input
    WHERE NOT EXISTS (SELECT 1 FROM recent WHERE recent.ord = input.ord)
    -- In (kind, key) order, not the caller's: a key another batch inserted is waited on,
    -- and two batches that take their keys in one order cannot each wait on the other's
    -- (in opposite orders they deadlocked). The ids, drawn in input order, keep it.
    ORDER BY kind, key, ord
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed', 'waiting')
    DO NOTHING
    RETURNING id, kind, key
),
holders AS (
    -- The pending holders to replace, locked in id order (as every statement that locks
    -- many jobs does), once the inserts are done: an insert of a key waits on an update of
    -- its holder, so a batch waiting there holds no holder's lock. A claim that locked the
    -- holder first wins: this waits for it, then finds the row claimed and leaves it alone.
    SELECT j.id, input.ord
    FROM input
    JOIN "billing_jobs".jobs j ON j.kind = input.kind AND j.key = input.key
    WHERE $13::boolean AND input.key IS NOT NULL AND j.status = 'pending'
      AND (SELECT count(*) FROM inserted) >= 0
    ORDER BY j.id
    FOR NO KEY UPDATE OF j
),
replaced AS (
    UPDATE "billing_jobs".jobs j
    SET carry = input.carry::jsonb, priority = input.priority,
        visible_at = coalesce(input.at, now() + make_interval(secs => coalesce(input.after, 0)))
    FROM holders JOIN input ON input.ord = holders.ord
    WHERE j.id = holders.id AND j.status = 'pending'
    RETURNING j.id
)
SELECT coalesce(mine.id, same_batch.id, existing.id, recent.id) AS id,
       CASE WHEN mine.id IS NOT NULL THEN 'inserted'
            WHEN same_batch.id IS NOT NULL THEN 'batch'
            WHEN existing.id IS NOT NULL THEN
                CASE WHEN existing.id IN (SELECT id FROM replaced) THEN 'replaced'
                     ELSE existing.status END
            WHEN recent.id IS NOT NULL THEN 'finished'
       END AS outcome
FROM input
LEFT JOIN inserted mine ON mine.id = input.id
-- Two rows of one batch with the same key: the later one gets the earlier one's id.
LEFT JOIN inserted same_batch
       ON input.key IS NOT NULL AND same_batch.kind = input.kind AND same_batch.key = input.key
LEFT JOIN LATERAL (
    SELECT j.id, j.status FROM "billing_jobs".jobs j
    WHERE input.key IS NOT NULL AND j.kind = input.kind AND j.key = input.key
      AND j.status IN ('pending', 'claimed', 'waiting')
    LIMIT 1
) existing ON true
LEFT JOIN recent ON recent.ord = input.ord
ORDER BY input.ord;

-- job_insert_many_unkeyed: enqueue many jobs that carry no de-duplication key, in one
-- statement; the fast path of enqueue_many (several times faster than job_insert_many,
-- which must match every row against existing keys).
-- The ids come back as one array in ascending order, which is input order: rows are
-- inserted in ordinality order and each takes the next identity value as it is inserted.
-- One array rather than a row per job: the driver decodes one value, not 1,000 rows
-- (0.4 us of the client's ~2.8 per job in a batch of 1,000; benchmarks/README.md,
-- "Bulk enqueue: the ids as one array").
-- The carries come as one JSON array rather than a text[]: the driver then encodes one
-- value, where a text[] of 1,000 costs it a type test per element, and the server parses
-- the same JSON once (benchmarks/JOURNAL.md, "the carries of a batch as one JSON array").
-- A column every row holds the same value of (the kind, priority and failure backstop
-- of a batch of one task) binds that value once, as $13-$15, and its array as NULL:
-- unnest pads a NULL array with NULLs, which the value fills.
-- $1 text[] kinds: the task kind of each row (NULL: $13 for every row)
-- $2 text carries: one JSON array of every row's msgspec-encoded carry, in row order
-- $3 smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW (NULL: $14 for every row)
-- $4 timestamptz[] ats: visible from (NULL: use afters)
-- $5 float8[] afters: visible after seconds (NULL: now)
-- $6 integer[] max_failures: each task's failure backstop (NULL: $15 for every row)
-- $7 float8[] backoff_bases: each task's declared Backoff, for recovery (NULL: none)
-- $8 float8[] backoff_factors: its growth per failure
-- $9 float8[] backoff_caps: its longest delay in seconds
-- $10 boolean[] backoff_jitters: whether it is half-jittered
-- $11 text traceparent: W3C trace context of the enqueuing span, for every row (NULL: none)
-- $12 text[] grps: each row's group (NULL: none; SPEC 13)
-- $13 text kind: every row's kind when $1 is NULL
-- $14 smallint priority: every row's priority when $3 is NULL
-- $15 integer max_failures: every row's failure backstop when $6 is NULL
-- index: none read; the statement's notify trigger fires once for the whole batch.
PREPARE billing_jobs_job_insert_many_unkeyed(text[], text, smallint[], timestamptz[], float8[], integer[], float8[], float8[], float8[], boolean[], text, text[], text, smallint, integer) AS
WITH inserted AS (
INSERT INTO "billing_jobs".jobs (kind, carry, priority, visible_at, max_failures,
                          backoff_base, backoff_factor, backoff_cap, backoff_jitter, traceparent,
                          grp)
SELECT coalesce(kind, $13::text), carry, coalesce(priority, $14::smallint),
       coalesce(at, now() + make_interval(secs => coalesce(after, 0))),
       coalesce(max_failures, $15::integer),
       backoff_base, backoff_factor, backoff_cap, backoff_jitter, $11::text, grp
FROM ROWS FROM (unnest($1::text[]), jsonb_array_elements($2::jsonb), unnest($3::smallint[]),
               unnest($4::timestamptz[]), unnest($5::float8[]), unnest($6::integer[]),
               unnest($7::float8[]), unnest($8::float8[]), unnest($9::float8[]),
               unnest($10::boolean[]), unnest($12::text[]))
     WITH ORDINALITY AS u(kind, carry, priority, at, after, max_failures,
                          backoff_base, backoff_factor, backoff_cap, backoff_jitter, grp, ord)
ORDER BY ord
RETURNING id
)
SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids FROM inserted;

-- job_list: the newest jobs, optionally of one status, one kind and one key, one page at
-- a time (`venturi jobs list`, the dashboard's /jobs and /api/jobs).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 integer max_rows: how many to return at most
-- $4 text key: only jobs with exactly this key (NULL: any)
-- $5 bigint before_id: only jobs with a smaller id, the keyset cursor (NULL: from the newest)
-- $6 text grp: only jobs of this group (NULL: any; SPEC 13)
-- index: primary key read backwards; jobs_kind_id_idx with a kind, jobs_failed_id_idx for
-- dead or cancelled, jobs_key_search_idx with a key, jobs_stale_idx for claimed, jobs_grp_id_idx (and the history's) with a group. Each is
-- an ordered scan that stops after max_rows, however deep the cursor, when the planner
-- sees the parameters (a custom plan: the dashboard forces them).
PREPARE billing_jobs_job_list(text, text, integer, text, bigint, text) AS
SELECT id, kind, status, priority, key, attempt, failures, max_failures, created_at,
       visible_at, claimed_at, claimed_by, claim_expires_at, finished_at, last_error,
       cancel_requested_at, grp AS "group"
FROM "billing_jobs".all_jobs
WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR kind = $2::text)
  AND ($4::text IS NULL OR key = $4::text)
  AND ($5::bigint IS NULL OR id < $5::bigint)
  AND ($6::text IS NULL OR grp = $6::text)
ORDER BY id DESC
LIMIT $3::integer;

-- job_list_claimed: the claimed jobs, grouped by the worker run that holds them (its
-- claim token and identity; the dashboard's /workers lists what each holds).
-- $1 integer max_rows: how many to return at most
-- index: jobs_stale_idx WHERE status = 'claimed' (claimed jobs are at most the fleet's
-- concurrency).
PREPARE billing_jobs_job_list_claimed(integer) AS
SELECT id, kind, claimed_by, claim_token, claimed_at, claim_expires_at, attempt,
       cancel_requested_at
FROM "billing_jobs".jobs
WHERE status = 'claimed'
ORDER BY claimed_by, claim_token, id
LIMIT $1::integer;

-- job_list_claimed_by: ids of the jobs whose latest claim is this worker's (the jobs a
-- `venturi.testing.drain` ran), in id order.
-- $1 text claimed_by: the worker's identity
-- index: none (a sequential scan); for test databases.
PREPARE billing_jobs_job_list_claimed_by(text) AS
SELECT id FROM "billing_jobs".jobs WHERE claimed_by = $1::text ORDER BY id;

-- job_mark_awaited: venturi.wait() marks the unfinished job it waits for, so that it
-- notifies the finished channel when it finishes (jobs_notify_finished). A finished job
-- is left alone: the waiter reads it next.
-- $1 bigint id: the job waited for
-- index: primary key.
PREPARE billing_jobs_job_mark_awaited(bigint) AS
UPDATE "billing_jobs".jobs
SET awaited = true
WHERE id = $1::bigint AND status IN ('pending', 'claimed', 'waiting') AND awaited IS NOT TRUE;

-- job_next_visible_at: when the nearest pending job of these kinds is or becomes
-- claimable (NULL: none), so an idle worker wakes exactly then. A time already past is
-- an answer too: the job became visible after the claim before this lookup read now()
-- (or is locked by a claim in progress), and the worker claims again at once; filtering
-- on visible_at > now() would skip it and leave it for poll_max.
-- groups_held (SPEC 13): whether a ready group of the kinds (not paused) has a due job:
-- with the claim before this lookup come back short, the group was at its cap (its slot
-- perhaps freed since that claim's snapshot), or held by a claim in flight. A slot
-- another worker frees sends no notification (a settlement notifies nobody), so the
-- idle worker looks again in CAP_RECHECK, as for a kind at its global cap: it slept
-- poll_max (a deploy's stopping worker freed the slot; 30 s by default). Not "a group
-- with a job claimed and one due": a slot freed between the claim and this lookup left
-- neither, and the worker slept poll_max still. The look walks the kinds' ready groups
-- until one has a due job: past groups at their caps with nothing pending, at most as
-- many as the jobs claimed at once, as the claim's own walk past them.
-- next_wake_at: the earliest timer of the kinds' waiting workflows (a sleep, a signal's
-- timeout), so the loop runs job_wake_due when it is due, and no claim pays for timers.
-- grouped_kinds, next_group_wake_at (SPEC 13): which of the worker's kinds have groups
-- (a group row, or a wake-up not yet applied), claimed by job_claim_grouped as well; and
-- the earliest wake-up of theirs still to come (a scheduled or retried job, a bucket's
-- next token), when an idle worker claims them again.
-- $1 text[] kinds: the kinds the worker could claim now (under their cap, with tokens)
-- $2 text[] all_kinds: every kind the worker runs
-- $3 text[] resting: grouped kinds the worker leaves alone a moment, their claim having
--    found nothing to do; a wake-up of theirs already due is an answer too (a claim of
--    theirs would have applied it; the worker ends their rest and claims them).
-- Only jobs visible later than their creation are looked at (the index's predicate): a
-- job visible from its creation that the claim did not take was committed after the
-- claim's snapshot, and its enqueue's notification wakes the worker; or another claim
-- holds it. Only jobs without a group (migration 23): a grouped job is found by its
-- group's wake-up (next_group_wake_at), and one its group holds back (paused, at its cap,
-- out of tokens) was due now to this lookup, and its worker claimed again and again.
-- index: jobs_next_visible_idx (pending rows without a group made visible later than
-- their creation, by kind, visible_at), one probe per kind;
-- jobs_wake_idx (waiting rows with a timer by kind, wake_at), one probe per kind;
-- groups primary key and group_wakes_due_idx, a probe or two per kind; paused_kinds'
-- primary key, a probe per kind; groups_ready_idx, with jobs_group_claim_idx for each
-- ready group until one has a due job.
PREPARE billing_jobs_job_next_visible_at(text[], text[], text[]) AS
SELECT min(next.visible_at) AS next_visible_at,
       (SELECT min(timer.wake_at)
        FROM unnest($1::text[]) AS w(kind)
        CROSS JOIN LATERAL (
            SELECT wake_at FROM "billing_jobs".jobs
            WHERE status = 'waiting' AND wake_at IS NOT NULL AND kind = w.kind
            ORDER BY wake_at
            LIMIT 1
        ) timer) AS next_wake_at,
       ARRAY(SELECT g.kind FROM unnest($2::text[]) AS g(kind)
      WHERE EXISTS (SELECT 1 FROM "billing_jobs".groups r WHERE r.kind = g.kind)
         OR EXISTS (SELECT 1 FROM "billing_jobs".group_wakes w WHERE w.kind = g.kind)) AS grouped_kinds,
       (SELECT min(gw.at)
        FROM unnest($2::text[]) AS gk(kind)
        CROSS JOIN LATERAL (
            SELECT w.at FROM "billing_jobs".group_wakes w
            WHERE w.kind = gk.kind AND (w.at > now() OR w.kind = ANY($3::text[]))
              -- A paused kind's wake-ups are no reason to wake either: no claim applies
              -- them while it is paused, so one due stayed due, and its worker claimed
              -- again and again with a backoff; the resume's notification wakes it.
              AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = gk.kind)
            ORDER BY w.at
            LIMIT 1
        ) gw) AS next_group_wake_at,
       EXISTS (
        SELECT 1
        FROM unnest($1::text[]) AS hk(kind)
        CROSS JOIN LATERAL (
            SELECT 1 FROM "billing_jobs".groups g
            WHERE g.kind = hk.kind AND g.ready AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = hk.kind)
              AND EXISTS (
                  SELECT 1 FROM "billing_jobs".jobs p
                  WHERE p.status = 'pending' AND p.grp IS NOT NULL AND p.kind = g.kind
                    AND p.grp = g.grp AND p.visible_at <= now())
            LIMIT 1
        ) h) AS groups_held
FROM unnest($1::text[]) AS k(kind)
-- A paused kind's schedule is no reason to wake.
CROSS JOIN LATERAL (
    SELECT visible_at FROM "billing_jobs".jobs
    WHERE status = 'pending' AND kind = k.kind AND visible_at > created_at AND grp IS NULL
      AND NOT EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = k.kind)
    ORDER BY visible_at
    LIMIT 1
) next;

-- job_overview: the dashboard's overview, per kind: due and scheduled pending, waiting
-- (workflows), claimed (and expired), completions and failures in the last $2 seconds, dead and cancelled,
-- the oldest due job's wait. Like job_top it never counts all completed jobs, which grow
-- without bound; `venturi stats` (job_stats) does, for operators who ask.
-- $1 text manual_detail: the journal detail of an operator's retry, not counted a failure
-- $2 float8 window: seconds of the recent completions and failures
-- index: jobs_claim_idx (pending), jobs_waiting_idx, jobs_stale_idx, jobs_finished_idx
-- (range scans of recent completions and of dead and cancelled jobs), journal_at_idx.
PREPARE billing_jobs_job_overview(text, float8) AS
WITH pending AS (
    -- jobs_claim_idx and jobs_group_claim_idx, by their included kind and visible_at.
    SELECT kind,
           count(*) FILTER (WHERE visible_at <= now()) AS due,
           count(*) FILTER (WHERE visible_at > now()) AS scheduled,
           -- How long the longest-waiting due job has been claimable (not since it was
           -- created: a job scheduled for later is not late before its time).
           extract(epoch FROM now() - min(visible_at) FILTER (WHERE visible_at <= now()))::float8
               AS oldest_due_seconds
    FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS p
    GROUP BY kind
),
waiting AS (
    -- jobs_waiting_idx (kind) WHERE status = 'waiting'.
    SELECT kind, count(*) AS waiting
    FROM "billing_jobs".jobs
    WHERE status = 'waiting'
    GROUP BY kind
),
claimed AS (
    -- jobs_stale_idx WHERE status = 'claimed'.
    SELECT kind,
           count(*) AS claimed,
           count(*) FILTER (WHERE claim_expires_at < now()) AS expired
    FROM "billing_jobs".jobs
    WHERE status = 'claimed'
    GROUP BY kind
),
failures AS (
    -- journal_at_idx. Failed executions only: an operator's manual retry is journaled
    -- as retried too, with its own detail, and is not one.
    SELECT j.kind, count(*) AS failures
    FROM "billing_jobs".journal l
    JOIN "billing_jobs".all_jobs j ON j.id = l.job_id
    WHERE l.at >= now() - make_interval(secs => $2::float8)
      AND l.event IN ('failed', 'retried', 'timed-out', 'stale-recovered')
      AND l.detail IS DISTINCT FROM $1::text
    GROUP BY j.kind
),
recent AS (
    SELECT kind, count(*) AS completed_recent
    FROM "billing_jobs".all_jobs
    WHERE status = 'completed' AND finished_at >= now() - make_interval(secs => $2::float8)
    GROUP BY kind
),
failed AS (
    SELECT kind,
           count(*) FILTER (WHERE status = 'dead') AS dead,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled
    FROM "billing_jobs".all_jobs
    WHERE status IN ('dead', 'cancelled') AND finished_at IS NOT NULL
    GROUP BY kind
),
kinds AS (
    SELECT kind FROM pending UNION SELECT kind FROM waiting UNION SELECT kind FROM claimed
    UNION SELECT kind FROM recent
    UNION SELECT kind FROM failed UNION SELECT kind FROM failures
)
SELECT k.kind,
       coalesce(p.due, 0) AS due,
       coalesce(p.scheduled, 0) AS scheduled,
       coalesce(w.waiting, 0) AS waiting,
       coalesce(c.claimed, 0) AS claimed,
       coalesce(c.expired, 0) AS expired,
       coalesce(r.completed_recent, 0) AS completed_recent,
       coalesce(x.failures, 0) AS failures_recent,
       coalesce(f.dead, 0) AS dead,
       coalesce(f.cancelled, 0) AS cancelled,
       p.oldest_due_seconds
FROM kinds k
LEFT JOIN pending p ON p.kind = k.kind
LEFT JOIN waiting w ON w.kind = k.kind
LEFT JOIN claimed c ON c.kind = k.kind
LEFT JOIN recent r ON r.kind = k.kind
LEFT JOIN failed f ON f.kind = k.kind
LEFT JOIN failures x ON x.kind = k.kind
ORDER BY k.kind;

-- job_pause_if_owned: checkpoint the carry and return the job to pending; not a failure.
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text carry: the new carry, msgspec-encoded JSON
-- $5 timestamptz at: visible again at (NULL: use $6)
-- $6 float8 after: visible again after seconds (NULL and $5 NULL: now)
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_pause_if_owned(uuid, bigint, integer, text, timestamptz, float8) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    -- An operator's cancel request that arrived while the handler was pausing wins.
    SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
        finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        carry = $4::jsonb,
        visible_at = coalesce($5::timestamptz, now() + make_interval(secs => coalesce($6::float8, 0))),
        claim_expires_at = NULL, claim_token = NULL
    WHERE j.id = $2 AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at, j.claimed_by, j.visible_at, j.status
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'paused', attempt, claimed_by, 'visible again at ' || visible_at
    FROM settled WHERE status = 'pending'
    UNION ALL
    SELECT id, now(), 'cancelled', attempt, claimed_by, 'cancelled by an operator; the handler paused'
    FROM settled WHERE status = 'cancelled'
)
SELECT id FROM settled;

-- job_purge_batch: retention: delete up to $4 finished jobs of one status that finished
-- more than $2 seconds ago, oldest first, from the history and from the live table (jobs
-- the maintenance pass has not moved yet), up to $4 from each; their journal rows, steps,
-- signals and search index rows go too. A finished workflow job that one which may still
-- run reads (a child of an unfinished, dead or cancelled parent, a dependency of such a
-- node) stays, and so does a keyed job while its unique_for still holds the key.
-- Returns how many it deleted; the caller repeats until a batch comes back short.
-- $1 text status: 'completed', 'dead' or 'cancelled'
-- $2 float8 older_than: seconds since finished_at
-- $3 text kind: only this kind (NULL: any)
-- $4 integer batch: most rows to delete in this statement
-- index: jobs_history_finished_idx and jobs_finished_idx (status, finished_at); a
-- workflow job's parent and dependents by the primary key and
-- dependencies_depends_on_idx; journal_job_idx; job_search_pkey.
PREPARE billing_jobs_job_purge_batch(text, float8, text, integer) AS
WITH doomed_live AS (
SELECT j.id FROM "billing_jobs".jobs j
    WHERE j.status = $1::text
      -- Never an unfinished job, whatever the caller passes.
      AND j.status IN ('completed', 'dead', 'cancelled')
      AND j.finished_at < now() - make_interval(secs => $2::float8)
      AND ($3::text IS NULL OR j.kind = $3::text)
      -- A keyed job's unique_for holds its key that long after it finished (an enqueue
      -- of the key finds it and makes no job): kept till then, whatever $2.
      AND (j.unique_for IS NULL
           OR j.finished_at < now() - make_interval(secs => j.unique_for))
      -- A workflow's jobs that may still run read it: a child's parent gathers its
      -- result, a Workflow node's dependents read it by name (ctx.result_of). Kept while
      -- they are unfinished, or dead or cancelled and kept themselves (a retry resumes
      -- them: docs/workflows.md); it goes on the pass after theirs. Plain jobs
      -- (parent_id NULL, linked NULL) skip both lookups.
      AND (j.parent_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".all_jobs p
          WHERE p.id = j.parent_id
            AND p.status IN ('pending', 'claimed', 'waiting', 'dead', 'cancelled')))
      AND (j.linked IS NOT TRUE OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".dependencies d
          JOIN "billing_jobs".all_jobs n ON n.id = d.job_id
          WHERE d.depends_on = j.id
            AND n.status IN ('pending', 'claimed', 'waiting', 'dead', 'cancelled')))
    ORDER BY j.finished_at
    LIMIT $4::integer
    -- An operator retrying one of these right now keeps it.
    FOR UPDATE SKIP LOCKED
),
doomed_history AS (
SELECT h.id FROM "billing_jobs".jobs_history h
    WHERE h.status = $1::text
      -- Never an unfinished job, whatever the caller passes.
      AND h.status IN ('completed', 'dead', 'cancelled')
      AND h.finished_at < now() - make_interval(secs => $2::float8)
      AND ($3::text IS NULL OR h.kind = $3::text)
      -- A keyed job's unique_for holds its key that long after it finished (an enqueue
      -- of the key finds it and makes no job): kept till then, whatever $2.
      AND (h.unique_for IS NULL
           OR h.finished_at < now() - make_interval(secs => h.unique_for))
      -- A workflow's jobs that may still run read it: a child's parent gathers its
      -- result, a Workflow node's dependents read it by name (ctx.result_of). Kept while
      -- they are unfinished, or dead or cancelled and kept themselves (a retry resumes
      -- them: docs/workflows.md); it goes on the pass after theirs. Plain jobs
      -- (parent_id NULL, linked NULL) skip both lookups.
      AND (h.parent_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".all_jobs p
          WHERE p.id = h.parent_id
            AND p.status IN ('pending', 'claimed', 'waiting', 'dead', 'cancelled')))
      AND (h.linked IS NOT TRUE OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".dependencies d
          JOIN "billing_jobs".all_jobs n ON n.id = d.job_id
          WHERE d.depends_on = h.id
            AND n.status IN ('pending', 'claimed', 'waiting', 'dead', 'cancelled')))
    ORDER BY h.finished_at
    LIMIT $4::integer
    -- An operator retrying one of these right now keeps it.
    FOR UPDATE SKIP LOCKED
),
deleted_live AS (
    DELETE FROM "billing_jobs".jobs j USING doomed_live WHERE j.id = doomed_live.id RETURNING j.id
),
deleted_history AS (
    DELETE FROM "billing_jobs".jobs_history h USING doomed_history WHERE h.id = doomed_history.id
    RETURNING h.id
),
deleted AS (
    SELECT id FROM deleted_live UNION ALL SELECT id FROM deleted_history
),
unjournaled AS (
    DELETE FROM "billing_jobs".journal l USING deleted WHERE l.job_id = deleted.id
),
unstepped AS (
    DELETE FROM "billing_jobs".steps st USING deleted WHERE st.job_id = deleted.id
),
unsignalled AS (
    DELETE FROM "billing_jobs".signals sg USING deleted WHERE sg.job_id = deleted.id
),
unlinked AS (
    DELETE FROM "billing_jobs".dependencies d USING deleted WHERE d.job_id = deleted.id
),
unindexed AS (
    DELETE FROM "billing_jobs".job_search x USING deleted WHERE x.job_id = deleted.id
)
SELECT count(*) AS deleted FROM deleted;

-- job_purge_count: how many jobs job_purge_batch would delete (`venturi purge --dry-run`),
-- by the same rule (a finished workflow job that one which may still run reads stays, and
-- a keyed job while its unique_for holds the key).
-- $1 text status: 'completed', 'dead' or 'cancelled'
-- $2 float8 older_than: seconds since finished_at
-- $3 text kind: only this kind (NULL: any)
-- index: jobs_finished_idx (status, finished_at); a workflow job's parent and dependents
-- by the primary key and dependencies_depends_on_idx.
PREPARE billing_jobs_job_purge_count(text, float8, text) AS
SELECT count(*) AS jobs FROM "billing_jobs".all_jobs j
WHERE j.status = $1::text
  AND j.status IN ('completed', 'dead', 'cancelled')
  AND j.finished_at < now() - make_interval(secs => $2::float8)
  AND ($3::text IS NULL OR j.kind = $3::text)
  -- A keyed job's unique_for holds its key that long after it finished: kept till then.
  AND (j.unique_for IS NULL OR j.finished_at < now() - make_interval(secs => j.unique_for))
  -- A workflow's jobs that may still run read it: a child's parent gathers its result,
  -- a Workflow node's dependents read it by name (ctx.result_of). Kept while they are
  -- unfinished, or dead or cancelled and kept themselves (a retry resumes them);
  -- plain jobs (parent_id NULL, linked NULL) skip both lookups.
  AND (j.parent_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM "billing_jobs".all_jobs p
      WHERE p.id = j.parent_id
        AND p.status IN ('pending', 'claimed', 'waiting', 'dead', 'cancelled')))
  AND (j.linked IS NOT TRUE OR NOT EXISTS (
      SELECT 1 FROM "billing_jobs".dependencies d
      JOIN "billing_jobs".all_jobs n ON n.id = d.job_id
      WHERE d.depends_on = j.id
        AND n.status IN ('pending', 'claimed', 'waiting', 'dead', 'cancelled')));

-- job_rank_set: set a job's order within its tier (rank, lower first) in the transaction
-- that inserted it, and read its created_at (the enqueuing transaction's clock); no row:
-- no such job. VenturiBackend keeps Django's numeric priorities in order this way.
-- $1 bigint id: the job
-- $2 smallint rank: its order within the tier, -32768..32767 (0: as the other jobs)
-- index: primary key.
PREPARE billing_jobs_job_rank_set(bigint, smallint) AS
UPDATE "billing_jobs".jobs
SET rank = $2::smallint
WHERE id = $1
RETURNING created_at;

-- job_recover_stale: return expired claims to pending (or dead at the backstop), at most
-- 1,000 per statement (the oldest expiries first). Run by every worker on a timer of its
-- own (venturi.runtime.recovery: at least every second, whatever the loop is doing) and by
-- `venturi recover`. Several workers may run it at once: each takes the expired rows no
-- other holds (SKIP LOCKED), and a row recovered by one is no longer claimed for the
-- next. With nothing expired it stops at the first live entry and writes nothing.
-- $1 text recoverer: identity of whoever recovers, for the journal
-- $2 float8 backoff_base: backoff of jobs whose task declared none, seconds of the first
-- $3 float8 backoff_factor: its growth per failure
-- $4 float8 backoff_cap: its longest delay in seconds
-- $5 boolean backoff_jitter: whether it is half-jittered
-- index: jobs_stale_idx (claimed rows by claim_expires_at).
PREPARE billing_jobs_job_recover_stale(text, float8, float8, float8, boolean) AS
WITH stale AS (
    SELECT id FROM "billing_jobs".jobs
    WHERE status = 'claimed' AND claim_expires_at < now()
    ORDER BY claim_expires_at
    LIMIT 1000
    -- Another recoverer (or the owner settling late) holds the row: leave it to them.
    FOR UPDATE SKIP LOCKED
),
recovered AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN j.failures + 1 >= j.max_failures THEN 'dead'
                      -- Cancelled while it ran: not run again.
                      WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      ELSE 'pending' END,
        failures = j.failures + 1,
        -- min(cap, base * factor^failures), half-jittered like Backoff.delay. In numeric,
        -- where any float8 factor to the 64th fits; least() bounds the exponent.
        visible_at = now() + make_interval(secs => least(
                coalesce(j.backoff_cap, $4::float8)::numeric,
                coalesce(j.backoff_base, $2::float8)::numeric
                * power(coalesce(j.backoff_factor, $3::float8)::numeric,
                        least(j.failures, 64)::numeric))::float8
            * CASE WHEN coalesce(j.backoff_jitter, $5::boolean)
                   THEN 0.5 + random() * 0.5 ELSE 1 END),
        finished_at = CASE WHEN j.failures + 1 >= j.max_failures
                             OR j.cancel_requested_at IS NOT NULL THEN now() END,
        claim_expires_at = NULL, claim_token = NULL,
        last_error = 'lease expired at ' || j.claim_expires_at || '; worker '
                     || coalesce(j.claimed_by, '?') || ' presumed dead'
    FROM stale
    WHERE j.id = stale.id
    RETURNING j.id, j.kind, j.status, j.attempt, j.failures, j.max_failures, j.claimed_by,
              j.claimed_at, j.last_error
),
recovered_journal AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM recovered
    UNION ALL
    SELECT id, now(), 'stale-recovered', attempt, $1, last_error FROM recovered
    UNION ALL
    SELECT id, now(), 'dead', attempt, $1,
           'failure backstop reached (' || failures || ' of ' || max_failures || ')'
    FROM recovered WHERE status = 'dead'
    UNION ALL
    SELECT id, now(), 'cancelled', attempt, $1, 'cancelled by an operator while running'
    FROM recovered WHERE status = 'cancelled'
)
SELECT id, kind, status, attempt, claimed_by FROM recovered ORDER BY id;

-- job_recover_worker: return one worker run's claims to pending now, expired or not
-- (`venturi recover --worker`, for a worker that is gone): each is a failed execution,
-- journaled stale-recovered, with backoff and the backstop, exactly as a lease expiry.
-- $1 text recoverer: identity of whoever recovers, for the journal
-- $2 float8 backoff_base: backoff of jobs whose task declared none, seconds of the first
-- $3 float8 backoff_factor: its growth per failure
-- $4 float8 backoff_cap: its longest delay in seconds
-- $5 boolean backoff_jitter: whether it is half-jittered
-- $6 uuid claim_token: the worker run (its id in the workers table)
-- $7 text reason: the jobs' last_error and the journal detail
-- The worker run is marked stopped (its last heartbeat kept): with its claims returned it
-- no longer counts as gone, which it did for a day, until pruned, keeping the alert on
-- venturi_queue_workers{state="gone"} firing. A run that was alive after all (--force,
-- or its network back) is marked running again by its next heartbeat (worker_heartbeat).
-- Each batch runs it again; only the first changes the row.
-- index: jobs_stale_idx WHERE status = 'claimed'; workers primary key.
PREPARE billing_jobs_job_recover_worker(text, float8, float8, float8, boolean, uuid, text) AS
WITH stale AS (
    SELECT id FROM "billing_jobs".jobs
    WHERE status = 'claimed' AND claim_token = $6::uuid
    ORDER BY claim_expires_at
    LIMIT 1000
    -- Another recoverer (or the owner settling late) holds the row: leave it to them.
    FOR UPDATE SKIP LOCKED
),
recovered AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN j.failures + 1 >= j.max_failures THEN 'dead'
                      -- Cancelled while it ran: not run again.
                      WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                      ELSE 'pending' END,
        failures = j.failures + 1,
        -- min(cap, base * factor^failures), half-jittered like Backoff.delay. In numeric,
        -- where any float8 factor to the 64th fits; least() bounds the exponent.
        visible_at = now() + make_interval(secs => least(
                coalesce(j.backoff_cap, $4::float8)::numeric,
                coalesce(j.backoff_base, $2::float8)::numeric
                * power(coalesce(j.backoff_factor, $3::float8)::numeric,
                        least(j.failures, 64)::numeric))::float8
            * CASE WHEN coalesce(j.backoff_jitter, $5::boolean)
                   THEN 0.5 + random() * 0.5 ELSE 1 END),
        finished_at = CASE WHEN j.failures + 1 >= j.max_failures
                             OR j.cancel_requested_at IS NOT NULL THEN now() END,
        claim_expires_at = NULL, claim_token = NULL,
        last_error = $7::text
    FROM stale
    WHERE j.id = stale.id
    RETURNING j.id, j.kind, j.status, j.attempt, j.failures, j.max_failures, j.claimed_by,
              j.claimed_at, j.last_error
),
recovered_journal AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM recovered
    UNION ALL
    SELECT id, now(), 'stale-recovered', attempt, $1, last_error FROM recovered
    UNION ALL
    SELECT id, now(), 'dead', attempt, $1,
           'failure backstop reached (' || failures || ' of ' || max_failures || ')'
    FROM recovered WHERE status = 'dead'
    UNION ALL
    SELECT id, now(), 'cancelled', attempt, $1, 'cancelled by an operator while running'
    FROM recovered WHERE status = 'cancelled'
),
stopped AS (
    UPDATE "billing_jobs".workers SET stopped_at = now()
    WHERE id = $6::uuid AND stopped_at IS NULL
)
SELECT id, kind, status, attempt, claimed_by FROM recovered ORDER BY id;

-- job_release_if_owned: give a job back after a forced shutdown: pending and visible now,
-- journaled as released, not counted as a failure (the worker gave up, not the job).
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text detail: why it was released
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_release_if_owned(uuid, bigint, integer, text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
        finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        visible_at = now(), claim_expires_at = NULL, claim_token = NULL
    WHERE j.id = $2 AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at, j.claimed_by, j.status
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'released', attempt, claimed_by, $4 FROM settled
    UNION ALL
    -- An operator asked to cancel it: released from this worker, it is not run again.
    SELECT id, now(), 'cancelled', attempt, claimed_by, 'cancelled by an operator while running'
    FROM settled WHERE status = 'cancelled'
)
SELECT id FROM settled;

-- job_release_orphans_if_owned: after a claim whose answer was lost with its connection
-- (the claim may have committed), give back the jobs this worker run claimed (its claim
-- token) that it is not running: pending, visible now, journaled released, no failure.
-- Without it they would wait a whole lease for recovery. The token, not the identity,
-- decides: another worker with the same claimed_by keeps its jobs.
-- $1 uuid claim_token: this worker run's ownership token
-- $2 bigint[] running: the jobs this worker is running or settling
-- index: jobs_stale_idx (claimed rows), filtered by claim_token.
PREPARE billing_jobs_job_release_orphans_if_owned(uuid, bigint[]) AS
WITH orphans AS (
    SELECT id FROM "billing_jobs".jobs
    WHERE status = 'claimed' AND claim_token = $1::uuid AND id <> ALL ($2::bigint[])
    FOR UPDATE SKIP LOCKED
),
released AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
        finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        visible_at = now(), claim_expires_at = NULL, claim_token = NULL
    FROM orphans
    WHERE j.id = orphans.id
    RETURNING j.id, j.kind, j.attempt, j.claimed_at, j.claimed_by, j.status
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM released
    UNION ALL
    SELECT id, now(), 'released', attempt, claimed_by,
           'claimed by a statement whose answer was lost with its connection'
    FROM released
    UNION ALL
    SELECT id, now(), 'cancelled', attempt, claimed_by, 'cancelled by an operator while claimed'
    FROM released WHERE status = 'cancelled'
)
SELECT id, kind, attempt FROM released ORDER BY id;

-- job_result_clear_expired: forget the results of up to $3 completed jobs of kind $1 that
-- finished more than $2 seconds ago (the task's result_ttl), up to $3 in the live table
-- and as many in the history; returns how many it cleared.
-- The caller repeats until a batch comes back short; each batch is its own short
-- transaction.
-- $1 text kind: the task kind
-- $2 float8 ttl: the kind's result_ttl in seconds
-- $3 integer batch: most rows to clear in this statement
-- index: jobs_result_idx and jobs_history_result_idx (kind, finished_at) WHERE status = 'completed' AND result IS NOT
-- NULL, so rows already cleared are never read again.
PREPARE billing_jobs_job_result_clear_expired(text, float8, integer) AS
WITH expired_live AS (
SELECT id FROM "billing_jobs".jobs
    WHERE kind = $1::text
      AND status = 'completed'
      AND result IS NOT NULL
      AND finished_at < now() - make_interval(secs => $2::float8)
    ORDER BY finished_at
    LIMIT $3::integer
    FOR UPDATE SKIP LOCKED
),
expired_history AS (
SELECT id FROM "billing_jobs".jobs_history
    WHERE kind = $1::text
      AND status = 'completed'
      AND result IS NOT NULL
      AND finished_at < now() - make_interval(secs => $2::float8)
    ORDER BY finished_at
    LIMIT $3::integer
    FOR UPDATE SKIP LOCKED
),
cleared_live AS (
    UPDATE "billing_jobs".jobs j SET result = NULL
    FROM expired_live e
    WHERE j.id = e.id
    RETURNING j.id
),
cleared_history AS (
    UPDATE "billing_jobs".jobs_history h SET result = NULL
    FROM expired_history e
    WHERE h.id = e.id
    RETURNING h.id
)
SELECT (SELECT count(*) FROM cleared_live) + (SELECT count(*) FROM cleared_history)
    AS cleared;

-- job_result_get: a job's stored result and how long ago it finished, for get_result.
-- $1 bigint id: the job
-- index: primary key.
PREPARE billing_jobs_job_result_get(bigint) AS
SELECT kind,
       status,
       result::text AS result,
       -- Measured on the database clock, the one ResultCleanup compares against.
       extract(epoch FROM now() - finished_at)::float8 AS finished_seconds_ago
FROM "billing_jobs".all_jobs
WHERE id = $1::bigint;

-- job_retry_many_if_dead_or_cancelled: an operator's retry: dead or cancelled jobs go back
-- to pending, visible now, with a fresh failure budget, journaled as retried. Returns one
-- row per distinct input id saying whether it was retried and, if not, why.
-- A Workflow node (SPEC 12: it runs only once every job it comes after has completed)
-- goes back to waiting instead while any of its dependencies is unfinished or retried in
-- this statement (wait_for, wait_count: the dependency's completion releases it through
-- workflow_settled, as at enqueue). A node with a dependency that is dead or cancelled and
-- not retried with it is refused, reported through blocked_by, and so are the nodes after
-- it among the ids. A dependency no longer in either table (purged) holds nothing up.
-- $1 bigint[] ids: the jobs to retry
-- $2 text operator: who asked, for the journal's worker column
-- $3 text detail: the journal entry's detail ('manual retry')
-- A job already moved to the history goes back to the live table: deleted there and
-- inserted here in this statement, with the same id, journal and steps.
-- index: primary keys (dependencies' for a job's dependencies); jobs_key_idx for the key
-- check.
PREPARE billing_jobs_job_retry_many_if_dead_or_cancelled(bigint[], text, text) AS
WITH RECURSIVE input AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
),
-- What this statement may retry, dependencies aside (read from its snapshot).
candidate AS (
    SELECT j.id FROM "billing_jobs".all_jobs j JOIN input ON input.id = j.id
    WHERE j.status IN ('dead', 'cancelled')
-- An unfinished job of the same kind may hold the key by now; pending again, this
      -- one would break the key's uniqueness. Refused, and reported through key_holder.
      AND (j.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".jobs o
          WHERE o.kind = j.kind AND o.key = j.key
            AND o.status IN ('pending', 'claimed', 'waiting')))
),
edge AS (
    SELECT d.job_id, d.depends_on
    FROM "billing_jobs".dependencies d JOIN candidate c ON c.id = d.job_id
),
-- The live dependencies, locked (FOR SHARE, in id order) before any retried row: one
-- completing now either has committed, and is read completed here, or waits for this
-- statement's commit and then finds the retried job waiting for it (workflow_settled
-- locks the dependency's row, then its dependents': the same order). The aggregates
-- below read all of this before the updates lock a row.
live_dependency AS (
    SELECT j.id, j.status FROM "billing_jobs".jobs j
    WHERE j.id IN (SELECT depends_on FROM edge)
    ORDER BY j.id
    FOR SHARE
),
edge_state AS (
    SELECT e.job_id, e.depends_on, coalesce(l.status, h.status) AS status,
           e.depends_on IN (SELECT id FROM candidate) AS retried_too
    FROM edge e
    LEFT JOIN live_dependency l ON l.id = e.depends_on
    LEFT JOIN "billing_jobs".jobs_history h ON h.id = e.depends_on
),
-- A dependency dead or cancelled and left so blocks its dependent, and a dependent
-- blocked blocks the nodes after it (a graph has no cycle: this ends).
blocked (id, by) AS (
    SELECT es.job_id, es.depends_on FROM edge_state es
    WHERE es.status IN ('dead', 'cancelled') AND NOT es.retried_too
    UNION
    SELECT es.job_id, es.depends_on FROM edge_state es JOIN blocked b ON b.id = es.depends_on
),
blocker AS (
    SELECT id, min(by) AS by FROM blocked GROUP BY id
),
-- What each retried node waits for: its dependencies unfinished or retried with it.
waits AS (
    SELECT es.job_id AS id, array_agg(es.depends_on ORDER BY es.depends_on) AS wait_for
    FROM edge_state es
    WHERE es.retried_too OR es.status IN ('pending', 'claimed', 'waiting')
    GROUP BY es.job_id
),
go AS (
    SELECT c.id, w.wait_for FROM candidate c
    LEFT JOIN waits w ON w.id = c.id
    WHERE NOT EXISTS (SELECT 1 FROM blocker b WHERE b.id = c.id)
),
retried_live AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN go.wait_for IS NULL THEN 'pending' ELSE 'waiting' END,
        visible_at = now(),
        -- A fresh budget: a job dead at its backstop would otherwise die on its next
        -- failure. The journal keeps the failures that came before.
        failures = 0,
        finished_at = NULL,
        result = NULL,
        claim_expires_at = NULL,
        cancel_requested_at = NULL,
        -- Waiting for its dependencies alone: no timer or signal of before wakes it.
        wait_for = coalesce(go.wait_for, j.wait_for),
        wait_count = CASE WHEN go.wait_for IS NULL THEN j.wait_count
                          ELSE cardinality(go.wait_for) END,
        wait_signal = CASE WHEN go.wait_for IS NULL THEN j.wait_signal END,
        wake_at = CASE WHEN go.wait_for IS NULL THEN j.wake_at END
    FROM go
    WHERE j.id = go.id
      AND j.status IN ('dead', 'cancelled')
-- An unfinished job of the same kind may hold the key by now; pending again, this
      -- one would break the key's uniqueness. Refused, and reported through key_holder.
      AND (j.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".jobs o
          WHERE o.kind = j.kind AND o.key = j.key
            AND o.status IN ('pending', 'claimed', 'waiting')))
    RETURNING j.id, j.attempt, j.status
),
revived AS (
    DELETE FROM "billing_jobs".jobs_history h
    USING go
    WHERE h.id = go.id
      AND h.status IN ('dead', 'cancelled')
-- An unfinished job of the same kind may hold the key by now; pending again, this
      -- one would break the key's uniqueness. Refused, and reported through key_holder.
      AND (h.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM "billing_jobs".jobs o
          WHERE o.kind = h.kind AND o.key = h.key
            AND o.status IN ('pending', 'claimed', 'waiting')))
    RETURNING h.*
),
-- The same changes as retried_live, on the way back.
retried_history AS (
    INSERT INTO "billing_jobs".jobs (id, kind, status, priority, carry, key, attempt, failures,
                              max_failures, created_at, visible_at, claimed_at, claimed_by,
                              claim_expires_at, finished_at, result, last_error,
                              cancel_requested_at, claim_token, backoff_base, backoff_factor,
                              backoff_cap, backoff_jitter, awaited, traceparent, parent_id,
                              linked, wake_seq, wait_for, wait_count, wait_signal, wake_at,
                              rank, grp, unique_for)
    SELECT r.id, r.kind, CASE WHEN go.wait_for IS NULL THEN 'pending' ELSE 'waiting' END,
           r.priority, r.carry, r.key, r.attempt, 0, r.max_failures,
           r.created_at, now(), r.claimed_at, r.claimed_by, NULL, NULL, NULL, r.last_error, NULL,
           r.claim_token, r.backoff_base, r.backoff_factor, r.backoff_cap, r.backoff_jitter,
           r.awaited, r.traceparent, r.parent_id, r.linked, r.wake_seq,
           coalesce(go.wait_for, r.wait_for),
           CASE WHEN go.wait_for IS NULL THEN r.wait_count ELSE cardinality(go.wait_for) END,
           CASE WHEN go.wait_for IS NULL THEN r.wait_signal END,
           CASE WHEN go.wait_for IS NULL THEN r.wake_at END, r.rank, r.grp, r.unique_for
    FROM revived r JOIN go ON go.id = r.id
    RETURNING id, attempt, status
),
retried AS (
    SELECT id, attempt, status FROM retried_live
    UNION ALL
    SELECT id, attempt, status FROM retried_history
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), 'retried', attempt, $2::text, $3::text FROM retried
)
-- The jobs below are read from the statement's snapshot: status is the one before.
SELECT input.id, j.kind, j.status AS was, r.id IS NOT NULL AS retried,
       holder.id AS key_holder, r.status AS now, go.wait_for, b.by AS blocked_by,
       bj.status AS blocker_status
FROM input
LEFT JOIN "billing_jobs".all_jobs j ON j.id = input.id
LEFT JOIN retried r ON r.id = input.id
LEFT JOIN go ON go.id = input.id
LEFT JOIN blocker b ON b.id = input.id
LEFT JOIN "billing_jobs".all_jobs bj ON bj.id = b.by
LEFT JOIN LATERAL (
    SELECT o.id FROM "billing_jobs".jobs o
    WHERE j.key IS NOT NULL AND o.kind = j.kind AND o.key = j.key
      AND o.status IN ('pending', 'claimed', 'waiting') AND o.id <> j.id
    LIMIT 1
) holder ON true
ORDER BY input.id;

-- job_run_now_many_if_pending: an operator's run-now: pending jobs scheduled for later
-- become visible now, journaled as released (not a failure) with the operator. A
-- workflow waiting on a timer (a sleep) has its recorded timers moved to now and becomes
-- pending, journaled as woken: the replayed sleep returns. A workflow waiting for a
-- signal is left alone unless $4 says to time it out: its signal's deadline is a timer
-- too, and moving it to now makes the replayed wait raise SignalTimeout, which an
-- operator must ask for by name (--timeout-now), never get from a plain run-now. The
-- update trigger notifies the schema's channel, which wakes idle workers of the kind.
-- Returns one row per distinct input id with its status before, what it waits for and
-- whether it moved.
-- $1 bigint[] ids: the jobs to run now
-- $2 text operator: who asked, for the journal's worker column
-- $3 text detail: the journal entry's detail
-- $4 boolean timeout_now: also time out the signal a job waits for (its deadline now)
-- index: primary key; primary key of steps (job_id, name) for the timers.
PREPARE billing_jobs_job_run_now_many_if_pending(bigint[], text, text, boolean) AS
WITH input AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
),
timers AS (
    UPDATE "billing_jobs".steps st
    SET wake_at = now()
    FROM input
    JOIN "billing_jobs".jobs w ON w.id = input.id AND w.status = 'waiting' AND w.wake_at IS NOT NULL
        AND (w.wait_signal IS NULL OR $4::boolean)
    WHERE st.job_id = input.id AND st.wake_at > now()
    RETURNING st.job_id
),
woken AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'pending', visible_at = now(), wake_at = NULL,
        wake_seq = coalesce(j.wake_seq, 0) + 1
    FROM input
    WHERE j.id = input.id AND j.status = 'waiting' AND j.wake_at IS NOT NULL
      AND (j.wait_signal IS NULL OR $4::boolean)
    RETURNING j.id, j.attempt, j.wait_signal
),
moved AS (
    UPDATE "billing_jobs".jobs j
    SET visible_at = now()
    FROM input
    WHERE j.id = input.id AND j.status = 'pending' AND j.visible_at > now()
    RETURNING j.id, j.attempt
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), 'released', attempt, $2::text, $3::text FROM moved
    UNION ALL
    SELECT id, now(), 'woken', attempt, $2::text,
           CASE WHEN wait_signal IS NULL THEN $3::text
                ELSE $3::text || ': signal ' || wait_signal || ' timed out' END
    FROM woken
)
-- Read from the statement's snapshot: status and visible_at are the ones before.
SELECT input.id, j.kind, j.status AS was, j.visible_at, j.wait_signal, j.wake_at,
       coalesce(j.wait_count, 0) AS wait_count,
       m.id IS NOT NULL OR w.id IS NOT NULL AS moved
FROM input
LEFT JOIN "billing_jobs".all_jobs j ON j.id = input.id
LEFT JOIN moved m ON m.id = input.id
LEFT JOIN woken w ON w.id = input.id
ORDER BY input.id;

-- job_search_count: how many jobs a filter of the dashboard's list (without a search)
-- matches, counted up to a cap (the page says "10,000+" beyond it: an exact count of a
-- million rows is not worth its time on every page; a bulk action's confirmation counts
-- exactly).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 integer cap: count at most this many
-- $5 text grp: only jobs of this group (NULL: any)
-- index: as job_search_older.
PREPARE billing_jobs_job_search_count(text, text, text, integer, text) AS
SELECT count(*) AS jobs
FROM (
    SELECT 1
    FROM "billing_jobs".all_jobs
    WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR kind = $2::text)
  AND ($3::text IS NULL OR key = $3::text)
  AND ($5::text IS NULL OR grp = $5::text)
    LIMIT $4::integer
) AS matched;

-- job_search_horizon: how far the search index may go now: every job that finishes from
-- here on has a finished_at at or after the horizon. finished_at is its transaction's
-- start (now()), so the horizon is the start of the oldest transaction open in this
-- database (one of them may be finishing a job), and at most $2 seconds ago: a
-- transaction's start reaches pg_stat_activity a moment after its now() is taken, and
-- pg_stat_activity hides the transactions of other roles from a role without
-- pg_read_all_stats (the margin covers those shorter than it). Read
-- before, and apart from, job_search_index_batch: a transaction that commits after that
-- statement's snapshot was open here, or began after, so none with an earlier finished_at
-- is missed. A transaction open for longer than $1 seconds is not waited for (an idle
-- session in a transaction would otherwise hold the index back for as long): a job it
-- finishes is found by a search only once it finishes again or the index is rebuilt
-- (docs/web.md).
-- $1 float8 patience: the oldest open transaction waited for, in seconds
-- $2 float8 margin: how far behind the clock the horizon stays at least, in seconds
-- index: none (pg_stat_activity).
PREPARE billing_jobs_job_search_horizon(float8, float8) AS
SELECT least(clock_timestamp() - make_interval(secs => $2::float8),
             min(a.xact_start) FILTER (
                 WHERE a.xact_start > clock_timestamp() - make_interval(secs => $1::float8)))
       AS horizon
FROM pg_stat_activity a
WHERE a.datname = current_database()
  AND a.pid <> pg_backend_pid();

-- job_search_index_batch: the search index's maintenance pass, one batch: the next jobs
-- finished after the watermark and before the horizon, oldest finish first, get their
-- document in job_search (replacing the words of an earlier finish), and the watermark
-- moves to the last of them, in one transaction. The watermark's row is locked for it;
-- a pass that finds it locked does nothing (another worker's pass is running).
-- Returns indexed (the jobs indexed, $2 or fewer: fewer means caught up) and locked
-- (false: another pass held the watermark).
-- $1 timestamptz horizon: from job_search_horizon, read before this statement
-- $2 integer batch: most jobs to index
-- index: job_search_state's primary key; jobs_finished_idx (status, finished_at) read in
-- order per status from the watermark, stopping at a batch; job_search_pkey (the upsert).
PREPARE billing_jobs_job_search_index_batch(timestamptz, integer) AS
WITH mark AS (
    SELECT indexed_at, indexed_id
    FROM "billing_jobs".job_search_state
    FOR UPDATE SKIP LOCKED
),
batch AS (
    -- Per status (the index's order within one), merged.
    SELECT n.id, n.finished_at
    FROM ((SELECT j.id, j.finished_at
           FROM "billing_jobs".all_jobs j
           WHERE j.status = 'completed'
             AND j.finished_at >= (SELECT indexed_at FROM mark)
             AND (j.finished_at > (SELECT indexed_at FROM mark) OR j.id > (SELECT indexed_id FROM mark))
             AND j.finished_at < $1::timestamptz
           ORDER BY j.finished_at, j.id
           LIMIT $2::integer)
          UNION ALL
          (SELECT j.id, j.finished_at
           FROM "billing_jobs".all_jobs j
           WHERE j.status = 'dead'
             AND j.finished_at >= (SELECT indexed_at FROM mark)
             AND (j.finished_at > (SELECT indexed_at FROM mark) OR j.id > (SELECT indexed_id FROM mark))
             AND j.finished_at < $1::timestamptz
           ORDER BY j.finished_at, j.id
           LIMIT $2::integer)
          UNION ALL
          (SELECT j.id, j.finished_at
           FROM "billing_jobs".all_jobs j
           WHERE j.status = 'cancelled'
             AND j.finished_at >= (SELECT indexed_at FROM mark)
             AND (j.finished_at > (SELECT indexed_at FROM mark) OR j.id > (SELECT indexed_id FROM mark))
             AND j.finished_at < $1::timestamptz
           ORDER BY j.finished_at, j.id
           LIMIT $2::integer)) AS n
    ORDER BY n.finished_at, n.id
    LIMIT $2::integer
),
indexed AS (
    INSERT INTO "billing_jobs".job_search (job_id, doc)
    SELECT j.id,
           to_tsvector('simple'::regconfig, j.kind || ' ' || coalesce(j.key, '') || ' '
           || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000))
           || array_to_tsvector(array_remove(
                  ARRAY['status ' || j.status, left('kind ' || j.kind, 500),
                        left('key ' || j.key, 500)], NULL))
    FROM batch
    JOIN "billing_jobs".all_jobs j ON j.id = batch.id
    ON CONFLICT (job_id) DO UPDATE SET doc = EXCLUDED.doc
    RETURNING 1
),
moved AS (
    UPDATE "billing_jobs".job_search_state
    SET indexed_at = last.finished_at, indexed_id = last.id
    FROM (SELECT id, finished_at FROM batch ORDER BY finished_at DESC, id DESC LIMIT 1) AS last
    WHERE EXISTS (SELECT 1 FROM mark)
    RETURNING 1
)
SELECT (SELECT count(*) FROM indexed)::integer AS indexed,
       EXISTS (SELECT 1 FROM mark) AS locked;

-- job_search_newer: the dashboard's job list paging back, without a search: the oldest
-- jobs a filter matches above an id, oldest first (the page shows them newest first).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 bigint after_id: only jobs with a greater id, the keyset cursor
-- $5 integer max_rows: how many to return at most
-- $6 text grp: only jobs of this group (NULL: any; jobs_grp_id_idx and the history's)
-- index: as job_search_older, read forwards from the cursor.
PREPARE billing_jobs_job_search_newer(text, text, text, bigint, integer, text) AS
SELECT id, kind, status, priority, key, attempt, failures, max_failures, created_at,
       visible_at, claimed_at, claimed_by, claim_expires_at, finished_at, last_error,
       cancel_requested_at, grp AS "group"
FROM "billing_jobs".all_jobs
WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR kind = $2::text)
  AND ($3::text IS NULL OR key = $3::text)
  AND ($6::text IS NULL OR grp = $6::text)
  AND id > $4::bigint
ORDER BY id
LIMIT $5::integer;

-- job_search_older: the dashboard's job list (/jobs) without a search: the newest jobs a
-- filter matches, one page at a time, paging to older jobs.
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 bigint before_id: only jobs with a smaller id, the keyset cursor (NULL: the newest)
-- $5 integer max_rows: how many to return at most
-- $6 text grp: only jobs of this group (NULL: any; jobs_grp_id_idx and the history's)
-- index: as job_list (jobs_pkey backwards, jobs_kind_id_idx, jobs_failed_id_idx,
-- jobs_key_search_idx, jobs_stale_idx): an ordered scan that stops at a page.
PREPARE billing_jobs_job_search_older(text, text, text, bigint, integer, text) AS
SELECT id, kind, status, priority, key, attempt, failures, max_failures, created_at,
       visible_at, claimed_at, claimed_by, claim_expires_at, finished_at, last_error,
       cancel_requested_at, grp AS "group"
FROM "billing_jobs".all_jobs
WHERE ($1::text IS NULL OR status = $1::text)
  AND ($2::text IS NULL OR kind = $2::text)
  AND ($3::text IS NULL OR key = $3::text)
  AND ($6::text IS NULL OR grp = $6::text)
  AND ($4::bigint IS NULL OR id < $4::bigint)
ORDER BY id DESC
LIMIT $5::integer;

-- job_search_query: the dashboard's search box text, resolved for the search statements
-- (_job_search_text.sql.j2):
-- query: the tsquery (as text) of the text: each word the text-search parser finds in it,
--   as the jobs' documents are made ('simple': lower case, no stemming; "order-33" is the
--   words order-33, order and -33, a URL its host and path), must be a word of the job;
--   at most 8 words. NULL when the text holds no word. Whole words, not prefixes: a
--   prefix expands to every word it begins (each id of each URL of a million carries).
-- patterns: per word, a LIKE pattern that the lower-cased text of every job whose
--   document holds the word matches ('%word%': a word is a piece of the text, lower-
--   cased); '%' for a word that is not ASCII, whose lower case may depend on its
--   neighbours. The search tests them before it computes a job's document.
-- indexed_at, indexed_id: the search index's watermark (job_search_state).
-- Run apart from the list, so that the list is planned with these values (the tsquery's
-- selectivity, the watermark's range) rather than with subqueries.
-- $1 text search: what the operator typed
-- index: job_search_state's primary key (one row).
PREPARE billing_jobs_job_search_query(text) AS
WITH words AS (
    SELECT lexeme
    FROM unnest(to_tsvector('simple'::regconfig, $1::text))
    ORDER BY lexeme
    LIMIT 8
)
SELECT (SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''',
                          ' & ' ORDER BY lexeme)
        FROM words) AS query,
       (SELECT coalesce(array_agg(CASE WHEN lexeme ~ '^[[:ascii:]]*$'
                                       THEN '%' || replace(replace(replace(lexeme, '\', '\\'),
                                                                   '%', '\%'), '_', '\_') || '%'
                                       ELSE '%' END ORDER BY lexeme), '{}')
        FROM words) AS patterns,
       s.indexed_at,
       s.indexed_id
FROM "billing_jobs".job_search_state s;

-- job_search_rows: the rows of one page of the dashboard's searched list, by id.
-- $1 bigint[] ids: the page's jobs
-- index: primary key.
PREPARE billing_jobs_job_search_rows(bigint[]) AS
SELECT id, kind, status, priority, key, attempt, failures, max_failures, created_at,
       visible_at, claimed_at, claimed_by, claim_expires_at, finished_at, last_error,
       cancel_requested_at, grp AS "group"
FROM "billing_jobs".all_jobs
WHERE id = ANY ($1::bigint[])
ORDER BY id DESC;

-- job_search_text_count: how many jobs of the known kinds and indexed jobs a filter and a
-- search of the dashboard's list match, counted up to a cap (the page says "10,000+"
-- beyond it); venturi.admin.search adds the jobs not indexed that match
-- (job_search_text_live_older), when they can still count.
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- $10 integer cap: count at most this many
-- index: the known kinds by jobs_kind_id_idx (or the primary key), then the indexed jobs
-- by job_search_doc_idx, or a scan of job_search that stops at the cap for a word that
-- many hold.
PREPARE billing_jobs_job_search_text_count(text, text, text, text, text[], text[], timestamptz, bigint, text, integer) AS
SELECT count(*) AS jobs
FROM (
    SELECT j.id
    FROM "billing_jobs".all_jobs j
    WHERE j.kind = ANY ($5::text[])
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    UNION ALL
    SELECT j.id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      AND x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
      AND j.kind <> ALL ($5::text[])
    LIMIT $10::integer

) AS matched
-- The patterns serve the jobs not indexed, which this statement leaves out; typed here
-- so that every search statement takes the same first eight parameters.
WHERE $6::text[] IS NOT NULL;

-- job_search_text_live_newer: job_search_text_live_older paging back: the oldest of the
-- jobs not indexed that a filter and a search match above an id, oldest first.
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- $10 bigint after_id: only jobs with a greater id, the keyset cursor
-- $11 bigint bound: only jobs with a smaller id (NULL: any): the newest of a page that
-- job_search_text_newer filled
-- $12 integer max_rows: how many to return at most
-- index: as job_search_text_live_older, forwards.
PREPARE billing_jobs_job_search_text_live_newer(text, text, text, text, text[], text[], timestamptz, bigint, text, bigint, bigint, integer) AS
WITH not_indexed AS (
    SELECT u.id, u.kind
    FROM (
        SELECT j.id, j.kind, j.kind || ' ' || coalesce(j.key, '') || ' '
                           || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000) AS words
        FROM "billing_jobs".all_jobs j
        WHERE $4::text IS NOT NULL
          AND ((j.status = 'pending' AND j.grp IS NULL)
             OR (j.status = 'pending' AND j.grp IS NOT NULL) OR j.status = 'claimed' OR j.status = 'waiting'
             OR (j.status IN ('completed', 'dead', 'cancelled')
                 AND j.finished_at >= $7::timestamptz
                 AND (j.finished_at > $7::timestamptz OR j.id > $8::bigint)))
          AND ($1::text IS NULL OR j.status = $1::text)
          AND ($2::text IS NULL OR j.kind = $2::text)
          AND ($3::text IS NULL OR j.key = $3::text)
          AND ($9::text IS NULL OR j.grp = $9::text)
          AND j.id > $10::bigint
          AND ($11::bigint IS NULL OR j.id < $11::bigint)
          AND lower(j.kind || ' ' || coalesce(j.key, '') || ' '
                || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000)) LIKE ALL ($6::text[])
        ORDER BY j.id
        -- OFFSET 0: sorted before the documents are computed, which stop at a page.
        OFFSET 0
    ) AS u
    WHERE to_tsvector('simple'::regconfig, u.words) @@ $4::text::tsquery
    LIMIT $12::integer
)
SELECT id, kind
FROM not_indexed
-- The known kinds serve the other arms (the caller leaves their jobs out of its count);
-- typed here so that every search statement takes the same first eight parameters.
WHERE $5::text[] IS NOT NULL
ORDER BY id;

-- job_search_text_live_older: the dashboard's job list with a search, its part that the
-- index does not hold (unfinished jobs, and those finished after the watermark): the
-- newest of them that a filter and a search match, with their kinds (a job of a known
-- kind is counted by job_search_text_count already).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- $10 bigint before_id: only jobs with a smaller id, the keyset cursor (NULL: the newest)
-- $11 bigint bound: only jobs with a greater id (NULL: any): the oldest of a page that
-- job_search_text_older filled, past which none of these is on the page
-- $12 integer max_rows: how many to return at most
-- index: jobs_claim_idx, jobs_group_claim_idx, jobs_stale_idx, jobs_waiting_idx and
-- jobs_finished_idx (a bitmap
-- of the jobs not indexed), or jobs_pkey backwards between the bound and the cursor; a
-- word's pattern is tested on each, and the documents of those that pass computed in id
-- order until a page.
PREPARE billing_jobs_job_search_text_live_older(text, text, text, text, text[], text[], timestamptz, bigint, text, bigint, bigint, integer) AS
WITH not_indexed AS (
    SELECT u.id, u.kind
    FROM (
        SELECT j.id, j.kind, j.kind || ' ' || coalesce(j.key, '') || ' '
                           || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000) AS words
        FROM "billing_jobs".all_jobs j
        WHERE $4::text IS NOT NULL
          AND ((j.status = 'pending' AND j.grp IS NULL)
             OR (j.status = 'pending' AND j.grp IS NOT NULL) OR j.status = 'claimed' OR j.status = 'waiting'
             OR (j.status IN ('completed', 'dead', 'cancelled')
                 AND j.finished_at >= $7::timestamptz
                 AND (j.finished_at > $7::timestamptz OR j.id > $8::bigint)))
          AND ($1::text IS NULL OR j.status = $1::text)
          AND ($2::text IS NULL OR j.kind = $2::text)
          AND ($3::text IS NULL OR j.key = $3::text)
          AND ($9::text IS NULL OR j.grp = $9::text)
          AND ($10::bigint IS NULL OR j.id < $10::bigint)
          AND ($11::bigint IS NULL OR j.id > $11::bigint)
          AND lower(j.kind || ' ' || coalesce(j.key, '') || ' '
                || right(coalesce(j.last_error, ''), 2000) || ' ' || left(j.carry::text, 8000)) LIKE ALL ($6::text[])
        ORDER BY j.id DESC
        -- OFFSET 0: sorted before the documents are computed, which stop at a page.
        OFFSET 0
    ) AS u
    WHERE to_tsvector('simple'::regconfig, u.words) @@ $4::text::tsquery
    LIMIT $12::integer
)
SELECT id, kind
FROM not_indexed
-- The known kinds serve the other arms (the caller leaves their jobs out of its count);
-- typed here so that every search statement takes the same first eight parameters.
WHERE $5::text[] IS NOT NULL
ORDER BY id DESC;

-- job_search_text_newer: job_search_text_older paging back: the oldest of the jobs of the
-- known kinds and of the indexed jobs that a filter and a search match above an id,
-- oldest first (the page shows them newest first).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- $10 bigint after_id: only jobs with a greater id, the keyset cursor
-- $11 integer max_rows: how many to return at most
-- index: as job_search_text_older, each arm read forwards from the cursor.
PREPARE billing_jobs_job_search_text_newer(text, text, text, text, text[], text[], timestamptz, bigint, text, bigint, integer) AS
WITH window_end AS (
    -- The first side row past the window (NULL: the window reaches the end).
    SELECT x.job_id
    FROM "billing_jobs".job_search x
    WHERE x.job_id > $10::bigint
    ORDER BY x.job_id
    OFFSET 20000
    LIMIT 1
),
known_kinds AS (
    SELECT j.id
    FROM "billing_jobs".all_jobs j
    WHERE j.kind = ANY ($5::text[])
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
      AND j.id > $10::bigint
    ORDER BY j.id
    LIMIT $11::integer
),
in_window AS MATERIALIZED (
    SELECT x.job_id AS id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      AND x.job_id > $10::bigint
      AND j.id > $10::bigint
      AND x.job_id < coalesce((SELECT job_id FROM window_end), 9223372036854775807)
      AND j.id < coalesce((SELECT job_id FROM window_end), 9223372036854775807)
      -- IS TRUE: not a GIN condition, so the window is read in order.
      AND (x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery) IS TRUE
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    ORDER BY x.job_id
    LIMIT $11::integer
),
past_window AS (
    SELECT x.job_id AS id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      -- Read only when the window held less than a page.
      AND (SELECT count(*) FROM in_window) < $11::integer
      AND x.job_id >= (SELECT job_id FROM window_end)
      AND j.id >= (SELECT job_id FROM window_end)
      AND x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    -- "+ 0": sorted, not an ordered scan of the primary key (which, for a word that few
    -- jobs hold, reads them all).
    ORDER BY x.job_id + 0
    LIMIT $11::integer
),
page AS (
    SELECT id FROM known_kinds
    UNION
    SELECT id FROM in_window
    UNION
    SELECT id FROM past_window
    ORDER BY id
    LIMIT $11::integer
)
SELECT id
FROM page
-- The patterns serve the jobs not indexed, which this statement leaves out; typed here
-- so that every search statement takes the same first eight parameters.
WHERE $6::text[] IS NOT NULL
ORDER BY id;

-- job_search_text_older: the dashboard's job list (/jobs) with a search, its indexed part:
-- the newest of the jobs of the known kinds and of the indexed jobs that a filter and a
-- search match, one page at a time, paging to older jobs (the jobs not indexed are
-- job_search_text_live_older's; venturi.admin.search merges the two).
-- $1 text status: only this status (NULL: any)
-- $2 text kind: only this kind (NULL: any)
-- $3 text key: only jobs with exactly this key (NULL: any)
-- $4 text search: the search's words, a tsquery of job_search_query (NULL: none)
-- $5 text[] kinds: the known kinds the search's text begins
-- $6 text[] patterns: a LIKE pattern per word (job_search_query)
-- $7 timestamptz indexed_at: the search index's watermark (job_search_state)
-- $8 bigint indexed_id: the watermark's job id
-- $9 text grp: only jobs of this group (NULL: any; SPEC 13)
-- $10 bigint before_id: only jobs with a smaller id, the keyset cursor (NULL: the newest)
-- $11 integer max_rows: how many to return at most
-- index: jobs_kind_id_idx or jobs_pkey backwards for the known kinds; job_search_pkey
-- backwards for a window of the newest indexed jobs, job_search_doc_idx (GIN) past it.
-- Each arm stops at a page.
PREPARE billing_jobs_job_search_text_older(text, text, text, text, text[], text[], timestamptz, bigint, text, bigint, integer) AS
WITH window_end AS (
    -- The first side row past the window (NULL: the window reaches the end).
    SELECT x.job_id
    FROM "billing_jobs".job_search x
    WHERE ($10::bigint IS NULL OR x.job_id < $10::bigint)
    ORDER BY x.job_id DESC
    OFFSET 20000
    LIMIT 1
),
known_kinds AS (
    SELECT j.id
    FROM "billing_jobs".all_jobs j
    WHERE j.kind = ANY ($5::text[])
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
      AND ($10::bigint IS NULL OR j.id < $10::bigint)
    ORDER BY j.id DESC
    LIMIT $11::integer
),
in_window AS MATERIALIZED (
    SELECT x.job_id AS id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      AND ($10::bigint IS NULL OR x.job_id < $10::bigint)
      AND ($10::bigint IS NULL OR j.id < $10::bigint)
      AND x.job_id > coalesce((SELECT job_id FROM window_end), -9223372036854775808)
      AND j.id > coalesce((SELECT job_id FROM window_end), -9223372036854775808)
      -- IS TRUE: not a GIN condition, so the window is read in order.
      AND (x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery) IS TRUE
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    ORDER BY x.job_id DESC
    LIMIT $11::integer
),
past_window AS (
    SELECT x.job_id AS id
    FROM "billing_jobs".job_search x
    CROSS JOIN LATERAL (
        SELECT * FROM "billing_jobs".all_jobs j1 WHERE j1.id = x.job_id LIMIT 1) AS j
    WHERE $4::text IS NOT NULL
      -- Read only when the window held less than a page.
      AND (SELECT count(*) FROM in_window) < $11::integer
      AND x.job_id <= (SELECT job_id FROM window_end)
      AND j.id <= (SELECT job_id FROM window_end)
      AND x.doc @@ ($4::text
       || coalesce(' & ' || ('''' || replace(replace(left('status ' || $1::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('kind ' || $2::text, 500), '\', '\\'), '''', '''''') || ''''), '')
       || coalesce(' & ' || ('''' || replace(replace(left('key ' || $3::text, 500), '\', '\\'), '''', '''''') || ''''), ''))::tsquery
      AND (j.finished_at < $7::timestamptz
         OR (j.finished_at = $7::timestamptz AND j.id <= $8::bigint))
      AND ($1::text IS NULL OR j.status = $1::text)
      AND ($2::text IS NULL OR j.kind = $2::text)
      AND ($3::text IS NULL OR j.key = $3::text)
      AND ($9::text IS NULL OR j.grp = $9::text)
    -- "+ 0": sorted, not an ordered scan of the primary key (which, for a word that few
    -- jobs hold, reads them all).
    ORDER BY x.job_id + 0 DESC
    LIMIT $11::integer
),
page AS (
    SELECT id FROM known_kinds
    UNION
    SELECT id FROM in_window
    UNION
    SELECT id FROM past_window
    ORDER BY id DESC
    LIMIT $11::integer
)
SELECT id
FROM page
-- The patterns serve the jobs not indexed, which this statement leaves out; typed here
-- so that every search statement takes the same first eight parameters.
WHERE $6::text[] IS NOT NULL
ORDER BY id DESC;

-- job_set_priority_many_if_pending: an operator's re-prioritisation: pending jobs take
-- priority $2, journaled as released (not a failure) with the operator and the change.
-- Returns one row per distinct input id with its status and priority before and whether
-- it changed (a job already at $2 is left as it is, unjournaled).
-- $1 bigint[] ids: the jobs
-- $2 smallint priority: 0 HIGH, 1 NORMAL, 2 LOW
-- $3 text operator: who asked, for the journal's worker column
-- $4 text detail: the journal entry's detail, followed by the priority before
-- index: primary key.
PREPARE billing_jobs_job_set_priority_many_if_pending(bigint[], smallint, text, text) AS
WITH input AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
),
moved AS (
    UPDATE "billing_jobs".jobs j
    SET priority = $2::smallint
    FROM input
    WHERE j.id = input.id AND j.status = 'pending' AND j.priority <> $2::smallint
    RETURNING j.id, j.attempt
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT m.id, now(), 'released', m.attempt, $3::text,
           $4::text || ' (was ' || CASE b.priority WHEN 0 THEN 'high' WHEN 1 THEN 'normal'
                                                   ELSE 'low' END || ')'
    FROM moved m
    -- Read from the statement's snapshot: the priority before.
    JOIN "billing_jobs".jobs b ON b.id = m.id
)
-- Read from the statement's snapshot: status and priority are the ones before.
SELECT input.id, j.kind, j.status AS was, j.priority AS was_priority,
       m.id IS NOT NULL AS moved
FROM input
LEFT JOIN "billing_jobs".all_jobs j ON j.id = input.id
LEFT JOIN moved m ON m.id = input.id
ORDER BY input.id;

-- job_statistics_state: whether the planner's statistics of the live table misjudge its
-- backlog (the claim loop asks when a full claim was slow; venturi.runtime.statistics).
-- believed: the pending rows the last ANALYZE saw (the rows it saw times the share of
-- 'pending' among its most common statuses; 0 for a table never analyzed). Below
-- $3 the planner may sort every pending row on each claim instead of reading the first
-- few from jobs_claim_idx (benchmarks/README.md, "A table without fresh statistics"),
-- so the pending rows are counted, up to $1 times the belief plus $2, by the claim
-- index; stale: more than that. From $3 on the plan reads the index whatever the
-- backlog, and nothing is counted.
-- allowed: whether this role may analyze the table (its owner or a member of its role).
-- $1 float8 factor: how many times the belief the backlog may be before it is stale
-- $2 bigint minimum: rows of backlog beyond the belief that never make it stale
-- $3 bigint enough: a belief from which the claim's plan needs no statistics
-- index: jobs_claim_idx and jobs_group_claim_idx (pending rows), at most $1 * believed + $2
-- of their entries.
PREPARE billing_jobs_job_statistics_state(float8, bigint, bigint) AS
WITH believed AS (
    SELECT c.oid, c.relowner,
           greatest(c.reltuples, 0) * coalesce((
               SELECT f.freq
               FROM pg_stats s
               JOIN pg_namespace n ON n.nspname = s.schemaname AND n.oid = c.relnamespace
               CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[],
                                         s.most_common_freqs) AS f(val, freq)
               WHERE s.tablename = c.relname AND s.attname = 'status'
                 AND f.val = 'pending'), 0) AS pending
    FROM pg_class c
    WHERE c.oid = to_regclass('"billing_jobs".jobs')
)
SELECT b.pending < $3::bigint
       AND (SELECT count(*) FROM (
                SELECT 1 FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS q
                LIMIT ($1::float8 * b.pending + $2::bigint)::bigint + 1) AS p)
           > $1::float8 * b.pending + $2::bigint AS stale,
       pg_has_role(b.relowner, 'MEMBER') AS allowed
FROM believed b;

-- job_stats: per kind: jobs in each status (waiting ones: workflows), the oldest due
-- job's wait, completions in the last $2 seconds and failures journaled in the last $3
-- seconds (`venturi stats`).
-- $1 text manual_detail: the journal detail of an operator's retry, not counted a failure
-- $2 float8 completed_window: seconds of the recent-completions window
-- $3 float8 failures_window: seconds of the recent-failures window
-- index: jobs_claim_idx (pending), jobs_waiting_idx, jobs_stale_idx, journal_at_idx; the
-- totals read every finished row (jobs_finished_idx or the table, as the planner
-- prefers): for operators, not for every second (job_top is).
PREPARE billing_jobs_job_stats(text, float8, float8) AS
WITH pending AS (
    -- jobs_claim_idx and jobs_group_claim_idx, by their included kind and visible_at.
    SELECT kind,
           count(*) FILTER (WHERE visible_at <= now()) AS due,
           count(*) FILTER (WHERE visible_at > now()) AS scheduled,
           -- How long the longest-waiting due job has been claimable (not since it was
           -- created: a job scheduled for later is not late before its time).
           extract(epoch FROM now() - min(visible_at) FILTER (WHERE visible_at <= now()))::float8
               AS oldest_due_seconds
    FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS p
    GROUP BY kind
),
waiting AS (
    -- jobs_waiting_idx (kind) WHERE status = 'waiting'.
    SELECT kind, count(*) AS waiting
    FROM "billing_jobs".jobs
    WHERE status = 'waiting'
    GROUP BY kind
),
claimed AS (
    -- jobs_stale_idx WHERE status = 'claimed'.
    SELECT kind,
           count(*) AS claimed,
           count(*) FILTER (WHERE claim_expires_at < now()) AS expired
    FROM "billing_jobs".jobs
    WHERE status = 'claimed'
    GROUP BY kind
),
failures AS (
    -- journal_at_idx. Failed executions only: an operator's manual retry is journaled
    -- as retried too, with its own detail, and is not one.
    SELECT j.kind, count(*) AS failures
    FROM "billing_jobs".journal l
    JOIN "billing_jobs".all_jobs j ON j.id = l.job_id
    WHERE l.at >= now() - make_interval(secs => $3::float8)
      AND l.event IN ('failed', 'retried', 'timed-out', 'stale-recovered')
      AND l.detail IS DISTINCT FROM $1::text
    GROUP BY j.kind
),
finished AS (
    SELECT kind,
           count(*) FILTER (WHERE status = 'completed') AS completed,
           count(*) FILTER (WHERE status = 'dead') AS dead,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
           count(*) FILTER (WHERE status = 'completed'
                              AND finished_at >= now() - make_interval(secs => $2::float8))
               AS completed_recent
    FROM "billing_jobs".all_jobs
    WHERE finished_at IS NOT NULL
    GROUP BY kind
),
kinds AS (
    SELECT kind FROM pending UNION SELECT kind FROM waiting UNION SELECT kind FROM claimed
    UNION SELECT kind FROM finished
)
SELECT k.kind,
       coalesce(p.due, 0) AS due,
       coalesce(p.scheduled, 0) AS scheduled,
       coalesce(w.waiting, 0) AS waiting,
       coalesce(c.claimed, 0) AS claimed,
       coalesce(c.expired, 0) AS expired,
       coalesce(f.completed, 0) AS completed,
       coalesce(f.dead, 0) AS dead,
       coalesce(f.cancelled, 0) AS cancelled,
       p.oldest_due_seconds,
       coalesce(f.completed_recent, 0) AS completed_recent,
       coalesce(x.failures, 0) AS failures_recent
FROM kinds k
LEFT JOIN pending p ON p.kind = k.kind
LEFT JOIN waiting w ON w.kind = k.kind
LEFT JOIN claimed c ON c.kind = k.kind
LEFT JOIN finished f ON f.kind = k.kind
LEFT JOIN failures x ON x.kind = k.kind
ORDER BY k.kind;

-- job_top: one frame of `venturi top`, per kind: due and scheduled pending, waiting
-- (workflows), claimed (and expired), completions in the last $2 seconds, failures in
-- the last $3 seconds, dead.
-- Unlike job_stats it never counts all completed jobs, so it stays cheap every second.
-- $1 text manual_detail: the journal detail of an operator's retry, not counted a failure
-- $2 float8 completed_window: seconds of the recent-completions window
-- $3 float8 failures_window: seconds of the recent-failures window
-- index: jobs_claim_idx (pending), jobs_waiting_idx, jobs_stale_idx, jobs_finished_idx (two
-- range scans), journal_at_idx.
PREPARE billing_jobs_job_top(text, float8, float8) AS
WITH pending AS (
    -- jobs_claim_idx and jobs_group_claim_idx, by their included kind and visible_at.
    SELECT kind,
           count(*) FILTER (WHERE visible_at <= now()) AS due,
           count(*) FILTER (WHERE visible_at > now()) AS scheduled,
           -- How long the longest-waiting due job has been claimable (not since it was
           -- created: a job scheduled for later is not late before its time).
           extract(epoch FROM now() - min(visible_at) FILTER (WHERE visible_at <= now()))::float8
               AS oldest_due_seconds
    FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS p
    GROUP BY kind
),
waiting AS (
    -- jobs_waiting_idx (kind) WHERE status = 'waiting'.
    SELECT kind, count(*) AS waiting
    FROM "billing_jobs".jobs
    WHERE status = 'waiting'
    GROUP BY kind
),
claimed AS (
    -- jobs_stale_idx WHERE status = 'claimed'.
    SELECT kind,
           count(*) AS claimed,
           count(*) FILTER (WHERE claim_expires_at < now()) AS expired
    FROM "billing_jobs".jobs
    WHERE status = 'claimed'
    GROUP BY kind
),
failures AS (
    -- journal_at_idx. Failed executions only: an operator's manual retry is journaled
    -- as retried too, with its own detail, and is not one.
    SELECT j.kind, count(*) AS failures
    FROM "billing_jobs".journal l
    JOIN "billing_jobs".all_jobs j ON j.id = l.job_id
    WHERE l.at >= now() - make_interval(secs => $3::float8)
      AND l.event IN ('failed', 'retried', 'timed-out', 'stale-recovered')
      AND l.detail IS DISTINCT FROM $1::text
    GROUP BY j.kind
),
recent AS (
    SELECT kind, count(*) AS completed_recent
    FROM "billing_jobs".all_jobs
    WHERE status = 'completed' AND finished_at >= now() - make_interval(secs => $2::float8)
    GROUP BY kind
),
dead AS (
    SELECT kind, count(*) AS dead
    FROM "billing_jobs".all_jobs
    WHERE status = 'dead' AND finished_at IS NOT NULL
    GROUP BY kind
),
kinds AS (
    SELECT kind FROM pending UNION SELECT kind FROM waiting UNION SELECT kind FROM claimed
    UNION SELECT kind FROM recent
    UNION SELECT kind FROM dead UNION SELECT kind FROM failures
)
SELECT k.kind,
       coalesce(p.due, 0) AS due,
       coalesce(p.scheduled, 0) AS scheduled,
       coalesce(w.waiting, 0) AS waiting,
       coalesce(c.claimed, 0) AS claimed,
       coalesce(c.expired, 0) AS expired,
       coalesce(r.completed_recent, 0) AS completed_recent,
       coalesce(x.failures, 0) AS failures_recent,
       coalesce(d.dead, 0) AS dead,
       p.oldest_due_seconds
FROM kinds k
LEFT JOIN pending p ON p.kind = k.kind
LEFT JOIN waiting w ON w.kind = k.kind
LEFT JOIN claimed c ON c.kind = k.kind
LEFT JOIN recent r ON r.kind = k.kind
LEFT JOIN dead d ON d.kind = k.kind
LEFT JOIN failures x ON x.kind = k.kind
ORDER BY k.kind;

-- job_undo_insert_if_key_finished: after an enqueue with unique_for inserted jobs, in
-- the same transaction, delete each inserted job whose key's holder finished within
-- unique_for after all, and return it with that holder. The insert cannot see it: a
-- holder completing while the insert waits on its key ends the conflict, and the
-- insert's snapshot is older than the completion. This statement's snapshot is newer.
-- $1 bigint[] ids: the jobs just inserted (uncommitted, so no worker has seen them)
-- $2 text[] kinds: their kinds
-- $3 text[] keys: their keys
-- $4 float8[] unique_fors: their tasks' unique_for in seconds
-- index: jobs_key_search_idx (the key's finished jobs); primary key for the delete.
PREPARE billing_jobs_job_undo_insert_if_key_finished(bigint[], text[], text[], float8[]) AS
WITH found AS (
    SELECT input.id, holder.id AS holder
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::float8[])
         AS input(id, kind, key, unique_for)
    JOIN LATERAL (
        SELECT j.id FROM "billing_jobs".all_jobs j
        WHERE j.key = input.key AND j.kind = input.kind AND j.id <> input.id
          AND j.finished_at > now() - make_interval(secs => input.unique_for)
        ORDER BY j.finished_at DESC
        LIMIT 1
    ) holder ON true
),
deleted AS (
    DELETE FROM "billing_jobs".jobs j USING found WHERE j.id = found.id
)
SELECT id, holder FROM found;

-- job_vacuum_state: what venturi.maintenance.Vacuum decides on: the live table's dead row
-- versions as PostgreSQL's statistics count them (since its last vacuum, by anyone), and
-- whether this role may vacuum it (the table's owner or a member of its role; a
-- superuser is a member of every role).
PREPARE billing_jobs_job_vacuum_state AS
SELECT pg_stat_get_dead_tuples(c.oid) AS dead,
       pg_has_role(c.relowner, 'MEMBER') AS allowed
FROM pg_class c
WHERE c.oid = to_regclass('"billing_jobs".jobs');

-- job_wait_if_owned: settle a workflow run that must wait (a timer, a signal, children):
-- the job gives up its claim and becomes 'waiting', holding no slot and no lease, unless
-- an event came since the run looked (wake_seq moved on) or its timer is already due:
-- then it is pending again at once. Guarded by the claim like every settlement.
-- Lost wake-ups: an event (signal_send, workflow_settled, job_wake_due) updates this row
-- too; the row lock orders the two UPDATEs and PostgreSQL re-evaluates the later one on
-- the row the earlier one committed, so each sees the other.
-- $1 uuid claim_token: ownership token of the worker run holding the claim
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 integer seen: the wake_seq the run's wait decision read
-- $5 timestamptz wake_at: the timer (NULL: none)
-- $6 text signal: the signal waited for (NULL: none)
-- $7 bigint[] wait_for: the children waited for, unfinished when the run looked (NULL: none)
-- $8 text detail: what it waits for, for the journal
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_wait_if_owned(uuid, bigint, integer, integer, timestamptz, text, bigint[], text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN coalesce(j.wake_seq, 0) = $4::integer
                           AND ($5::timestamptz IS NULL OR $5::timestamptz > now())
                      THEN 'waiting' ELSE 'pending' END,
        visible_at = now(), claim_expires_at = NULL, claim_token = NULL,
        wake_at = $5::timestamptz, wait_signal = $6::text, wait_for = $7::bigint[],
        wait_count = cardinality($7::bigint[])
    WHERE j.id = $2::bigint AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = $3::integer
    RETURNING j.id, j.status, j.attempt, j.claimed_at, j.claimed_by
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'waiting', attempt, claimed_by, $8::text FROM settled
    UNION ALL
    SELECT id, now(), 'woken', attempt, claimed_by,
           'what it waits for happened while it decided to wait'
    FROM settled WHERE status = 'pending'
)
SELECT status FROM settled;

-- job_wait_many_if_owned: job_wait_if_owned for several runs of one worker at once (its
-- loop settles every run that waits in one statement, not one per run): each job gives
-- up its claim and becomes 'waiting', unless an event came since its run looked
-- (wake_seq moved on) or its timer is already due: then it is pending again at once.
-- Guarded by the claim like every settlement. The rows are locked in id order first, so
-- two such statements (two workers) never wait for each other in a circle.
-- Lost wake-ups: as job_wait_if_owned (the row lock orders an event's UPDATE and this
-- one, and PostgreSQL re-evaluates the later on the row the earlier committed).
-- $1 uuid claim_token: ownership token of the worker run holding the claims
-- $2 bigint[] ids: the jobs
-- $3 integer[] attempts: the claims they were run under
-- $4 integer[] seen: the wake_seq each run's wait decision read
-- $5 timestamptz[] wake_at: each one's timer (NULL: none)
-- $6 text[] signals: the signal each waits for (NULL: none)
-- $7 text[] wait_for: the children each waits for, as bigint[] literals ('{1,2}'),
--    unfinished when its run looked (NULL: none); text, since PostgreSQL's arrays of
--    arrays must be rectangular
-- $8 text[] details: what each waits for, for the journal
-- index: primary key, whatever the statistics (the ownership guard of
-- statements/_owned.sql.j2 says why).
PREPARE billing_jobs_job_wait_many_if_owned(uuid, bigint[], integer[], integer[], timestamptz[], text[], text[], text[]) AS
WITH w AS (
    SELECT u.id, u.attempt, u.seen, u.wake_at, u.signal, u.wait_for::bigint[] AS wait_for,
           u.detail
    FROM unnest($2::bigint[], $3::integer[], $4::integer[], $5::timestamptz[], $6::text[],
                $7::text[], $8::text[]) AS u(id, attempt, seen, wake_at, signal, wait_for, detail)
),
locked AS (
    SELECT j.id
    FROM "billing_jobs".jobs j
    JOIN w ON w.id = j.id
    WHERE j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = w.attempt
    ORDER BY j.id
    FOR NO KEY UPDATE OF j
),
settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = CASE WHEN coalesce(j.wake_seq, 0) = w.seen
                           AND (w.wake_at IS NULL OR w.wake_at > now())
                      THEN 'waiting' ELSE 'pending' END,
        visible_at = now(), claim_expires_at = NULL, claim_token = NULL,
        wake_at = w.wake_at, wait_signal = w.signal, wait_for = w.wait_for,
        wait_count = cardinality(w.wait_for)
    FROM w
    WHERE j.id = w.id AND j.id IN (SELECT id FROM locked)
      AND j.status = (SELECT 'claimed') AND j.claim_token = $1::uuid AND j.attempt = w.attempt
    RETURNING j.id, j.status, j.attempt, j.claimed_at, j.claimed_by, w.detail
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, claimed_by, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'waiting', attempt, claimed_by, detail FROM settled
    UNION ALL
    SELECT id, now(), 'woken', attempt, claimed_by,
           'what it waits for happened while it decided to wait'
    FROM settled WHERE status = 'pending'
)
SELECT id, status FROM settled;

-- job_wake_due: waiting jobs of these kinds whose timer is due (a sleep, a signal's
-- timeout) become pending now, journaled as woken; the update trigger notifies. Run by a
-- worker loop when the earliest timer it learned of (job_next_visible_at) is due, not
-- on every claim. Returns how many it woke.
-- $1 text[] kinds: the worker's kinds
-- index: jobs_wake_idx (waiting jobs with a timer, by kind and wake_at).
PREPARE billing_jobs_job_wake_due(text[]) AS
WITH due AS (
    SELECT id FROM "billing_jobs".jobs
    WHERE status = 'waiting' AND kind = ANY ($1::text[]) AND wake_at <= now()
    ORDER BY wake_at
    LIMIT 1000
    -- Another worker waking the same timers (or a signal) holds the row: leave it.
    FOR NO KEY UPDATE SKIP LOCKED
),
woken AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'pending', visible_at = now(), wake_at = NULL,
        wake_seq = coalesce(j.wake_seq, 0) + 1
    FROM due
    WHERE j.id = due.id AND j.status = 'waiting'
    RETURNING j.id, j.attempt, j.wait_signal
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), 'woken', attempt, NULL,
           CASE WHEN wait_signal IS NULL THEN 'its timer was due'
                ELSE 'its wait for signal ' || wait_signal || ' timed out' END
    FROM woken
)
SELECT count(*)::integer AS woken FROM woken;

-- job_wake_timers_now: venturi.testing.drain, which runs workflows without waiting for
-- their timers: the waiting jobs of these kinds that have a timer (a sleep, a signal's
-- timeout) get their recorded timers moved to now and become pending, journaled as
-- woken, as if the time had come. Returns how many it woke.
-- $1 text[] kinds: the kinds being drained
-- index: jobs_wake_idx (waiting jobs with a timer, by kind); primary key of steps.
PREPARE billing_jobs_job_wake_timers_now(text[]) AS
WITH waiting AS (
    SELECT id FROM "billing_jobs".jobs
    WHERE status = 'waiting' AND wake_at IS NOT NULL AND kind = ANY ($1::text[])
    FOR NO KEY UPDATE
),
timers AS (
    UPDATE "billing_jobs".steps st
    SET wake_at = now()
    FROM waiting w
    WHERE st.job_id = w.id AND st.wake_at > now()
    RETURNING st.job_id
),
woken AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'pending', visible_at = now(), wake_at = NULL,
        wake_seq = coalesce(j.wake_seq, 0) + 1
    FROM waiting w
    WHERE j.id = w.id
    RETURNING j.id, j.attempt
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), 'woken', attempt, NULL, 'timer fast-forwarded (venturi.testing.drain)'
    FROM woken
)
SELECT count(*)::integer AS woken FROM woken;

-- job_workflow_get: a job's workflow side for `venturi jobs show` (and /api/jobs/{id}):
-- its parent, what it waits for now (the wait columns, meaningful while waiting), and
-- as JSON arrays its recorded steps (name, recorded_at), signals (name, sent_at),
-- children (id, kind, status) and dependencies (node name, id, kind, status; kind and
-- status NULL for a purged dependency). No row when the job does not exist; empty
-- arrays for a plain job. A primitive's internal records (a signal's deadline and
-- timeout, named after it with chr(31), which a step's own name never holds) are no
-- steps and are left out. kind_paused: the job's own kind is paused; paused_awaited: the
-- paused kinds among the jobs it waits for (while waiting), which wait with their kind.
-- $1 bigint id: the job
-- index: primary keys of jobs, steps, signals, dependencies and paused_kinds;
-- jobs_parent_idx for the children.
PREPARE billing_jobs_job_workflow_get(bigint) AS
SELECT j.status, j.parent_id, j.wake_at, j.wait_signal, j.wait_for, j.wait_count,
       EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = j.kind) AS kind_paused,
       (SELECT coalesce(array_agg(DISTINCT a.kind ORDER BY a.kind), '{}')
        FROM unnest(j.wait_for) AS w(id)
        JOIN "billing_jobs".all_jobs a ON a.id = w.id
        JOIN "billing_jobs".paused_kinds p ON p.kind = a.kind) AS paused_awaited,
       (SELECT coalesce(json_agg(json_build_object('name', s.name,
                                                   'recorded_at', s.recorded_at)
                                 ORDER BY s.recorded_at, s.name), '[]')
        FROM "billing_jobs".steps s
        WHERE s.job_id = j.id AND strpos(s.name, chr(31)) = 0)::text AS steps,
       (SELECT coalesce(json_agg(json_build_object('name', g.name, 'sent_at', g.sent_at)
                                 ORDER BY g.sent_at, g.name), '[]')
        FROM "billing_jobs".signals g WHERE g.job_id = j.id)::text AS signals,
       (SELECT coalesce(json_agg(json_build_object('id', c.id, 'kind', c.kind,
                                                   'status', c.status)
                                 ORDER BY c.id), '[]')
        FROM "billing_jobs".all_jobs c WHERE c.parent_id = j.id)::text AS children,
       (SELECT coalesce(json_agg(json_build_object('name', d.name, 'id', d.depends_on,
                                                   'kind', n.kind, 'status', n.status)
                                 ORDER BY d.name), '[]')
        FROM "billing_jobs".dependencies d
        LEFT JOIN "billing_jobs".all_jobs n ON n.id = d.depends_on
        WHERE d.job_id = j.id)::text AS dependencies
FROM "billing_jobs".all_jobs j
WHERE j.id = $1::bigint;

-- job_workflow_view: a job's workflow side for the dashboard's job page, bounded however
-- big the workflow: its parent and root (the top of its parents, at most 100 up), what
-- it waits for now (the timer, the signal, and how many of the awaited jobs are its
-- children and its dependencies), how many steps, signals, children (and of them
-- finished), dependencies and dependents it has (each counted up to $3), and the first
-- $2 steps (name, recorded_at, a timer's wake_at) and signals (name, sent_at) in the
-- order they came, as JSON arrays. No row when the job does not exist.
-- $1 bigint id: the job
-- $2 integer max_rows: how many steps and signals to list at most
-- $3 integer cap: count at most this many of each
-- index: primary keys of jobs, steps, signals and dependencies; jobs_parent_idx for the
-- children, dependencies_depends_on_idx for the dependents.
PREPARE billing_jobs_job_workflow_view(bigint, integer, integer) AS
WITH RECURSIVE up(id, parent_id, depth) AS (
    SELECT j.id, j.parent_id, 0 FROM "billing_jobs".all_jobs j WHERE j.id = $1::bigint
    UNION ALL
    SELECT p.id, p.parent_id, u.depth + 1
    FROM up u JOIN "billing_jobs".all_jobs p ON p.id = u.parent_id
    WHERE u.depth < 100
)
SELECT j.status, j.parent_id, j.wake_at, j.wait_signal,
       -- The job's own kind paused, and the paused kinds among the jobs it waits for.
       EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = j.kind) AS kind_paused,
       (SELECT coalesce(array_agg(DISTINCT a.kind ORDER BY a.kind), '{}')
        FROM unnest(j.wait_for) AS w(id)
        JOIN "billing_jobs".all_jobs a ON a.id = w.id
        JOIN "billing_jobs".paused_kinds p ON p.kind = a.kind) AS paused_awaited,
       (SELECT u.id FROM up u ORDER BY u.depth DESC LIMIT 1) AS root_id,
       (SELECT count(*) FROM unnest(j.wait_for) AS w(id)
        JOIN "billing_jobs".all_jobs c ON c.id = w.id AND c.parent_id = j.id)::integer AS waiting_children,
       (SELECT count(*) FROM unnest(j.wait_for) AS w(id)
        JOIN "billing_jobs".dependencies d ON d.job_id = j.id AND d.depends_on = w.id)::integer
           AS waiting_dependencies,
       -- A primitive's internal records (named with chr(31), never in a step's own
       -- name: a signal's deadline and timeout) are no steps, here as in the list below.
       (SELECT count(*) FROM (SELECT 1 FROM "billing_jobs".steps s
                              WHERE s.job_id = j.id AND strpos(s.name, chr(31)) = 0
                              LIMIT $3::integer) AS x)::integer AS steps_total,
       (SELECT count(*) FROM (SELECT 1 FROM "billing_jobs".signals g WHERE g.job_id = j.id
                              LIMIT $3::integer) AS x)::integer AS signals_total,
       c.total::integer AS children_total, c.finished::integer AS children_finished,
       (SELECT count(*) FROM (SELECT 1 FROM "billing_jobs".dependencies d WHERE d.job_id = j.id
                              LIMIT $3::integer) AS x)::integer AS dependencies_total,
       (SELECT count(*) FROM (SELECT 1 FROM "billing_jobs".dependencies d WHERE d.depends_on = j.id
                              LIMIT $3::integer) AS x)::integer AS dependents_total,
       (SELECT coalesce(json_agg(json_build_object('name', x.name,
                                                   'recorded_at', x.recorded_at,
                                                   'wake_at', x.wake_at)
                                 ORDER BY x.recorded_at, x.name), '[]')
        FROM (SELECT s.name, s.recorded_at, s.wake_at FROM "billing_jobs".steps s
              WHERE s.job_id = j.id AND strpos(s.name, chr(31)) = 0
              ORDER BY s.recorded_at, s.name
              LIMIT $2::integer) AS x)::text AS steps,
       (SELECT coalesce(json_agg(json_build_object('name', x.name, 'sent_at', x.sent_at)
                                 ORDER BY x.sent_at, x.name), '[]')
        FROM (SELECT g.name, g.sent_at FROM "billing_jobs".signals g
              WHERE g.job_id = j.id ORDER BY g.sent_at, g.name
              LIMIT $2::integer) AS x)::text AS signals
FROM "billing_jobs".all_jobs j
CROSS JOIN LATERAL (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE x.status IN ('completed', 'dead', 'cancelled')) AS finished
    FROM (SELECT k.status FROM "billing_jobs".all_jobs k WHERE k.parent_id = j.id LIMIT $3::integer) AS x
) AS c
WHERE j.id = $1::bigint;

-- journal_get: a job's written history, oldest first; the routine enqueued / claimed /
-- completed entries are read off the job row by the caller and merged in.
-- $1 bigint job_id: the job
-- index: journal_job_idx.
PREPARE billing_jobs_journal_get(bigint) AS
SELECT at, event, attempt, worker, detail
FROM "billing_jobs".journal
WHERE job_id = $1
ORDER BY at, id;

-- kind_cap_lock: take a kind's global-cap lock until the transaction ends, the lock the
-- schema's claim_capped_v3 takes; a grouped claim of a kind with a global cap runs after
-- it in the same transaction, so its snapshot sees every claim of the kind before it.
-- $1 text kind: the capped kind
-- index: none (an advisory lock).
PREPARE billing_jobs_kind_cap_lock(text) AS
SELECT pg_advisory_xact_lock(hashtextextended('venturi cap "billing_jobs" ' || $1::text, 0));

-- kind_list: every kind the database knows, with its pause if it has one: the kinds of
-- jobs (any status), of recurring schedules, of registered workers, and the paused ones
-- (a kind may be paused before any job of it exists).
-- index: jobs_kind_id_idx (kind, id), read as a skip scan: one index probe per distinct
-- kind, not a pass over every job; the other tables are small.
PREPARE billing_jobs_kind_list AS
WITH RECURSIVE job_kinds AS (
    (SELECT j.kind FROM "billing_jobs".all_jobs j ORDER BY j.kind LIMIT 1)
    UNION ALL
    SELECT (SELECT j.kind FROM "billing_jobs".all_jobs j WHERE j.kind > k.kind ORDER BY j.kind LIMIT 1)
    FROM job_kinds k
    WHERE k.kind IS NOT NULL
),
known AS (
    SELECT kind FROM job_kinds WHERE kind IS NOT NULL
    UNION
    SELECT name FROM "billing_jobs".schedules
    UNION
    SELECT unnest(kinds) FROM "billing_jobs".workers
    UNION
    SELECT kind FROM "billing_jobs".paused_kinds
)
SELECT k.kind, p.paused_at, p.paused_by, p.reason
FROM known k
LEFT JOIN "billing_jobs".paused_kinds p ON p.kind = k.kind
ORDER BY k.kind;

-- kind_list_known: of the given kinds, those the database knows: a job of the kind exists
-- (any status), a recurring schedule carries its name, or a worker that has not stopped
-- registered it (a task deployed before its first job). `venturi kinds pause` warns about
-- the others, which are most often misspelt.
-- $1 text[] kinds: the kinds to look up
-- index: jobs_kind_id_idx answers a kind with pending jobs and schedules' primary key
-- a schedule; a kind with neither reads the jobs table once (an operator command, run by
-- hand, never on the job path).
PREPARE billing_jobs_kind_list_known(text[]) AS
SELECT k.kind
FROM unnest($1::text[]) AS k (kind)
WHERE EXISTS (SELECT 1 FROM "billing_jobs".jobs j WHERE j.kind = k.kind AND j.status = 'pending')
   OR EXISTS (SELECT 1 FROM "billing_jobs".schedules c WHERE c.name = k.kind)
   -- The registry holds a row per worker process, a few dozen: read whole.
   OR EXISTS (SELECT 1 FROM "billing_jobs".workers w
              WHERE w.stopped_at IS NULL AND k.kind = ANY (w.kinds))
   OR EXISTS (SELECT 1 FROM "billing_jobs".all_jobs j WHERE j.kind = k.kind);

-- kind_list_unserved: kinds with due jobs that no live worker registers (the opt-in
-- UnservedKinds warning), with how many are due and the oldest one's wait. A paused kind
-- is left out: its jobs wait because an operator said so.
-- $1 float8 liveness: seconds without a heartbeat after which a worker is gone
-- index: jobs_claim_idx and jobs_group_claim_idx (pending; kind and visible_at included).
PREPARE billing_jobs_kind_list_unserved(float8) AS
WITH served AS (
    SELECT DISTINCT unnest(kinds) AS kind
    FROM "billing_jobs".workers
    WHERE stopped_at IS NULL AND heartbeat_at >= now() - make_interval(secs => $1::float8)
)
SELECT kind, count(*) AS due,
       extract(epoch FROM now() - min(visible_at))::float8 AS oldest_due_seconds
FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS p
WHERE visible_at <= now()
  AND kind NOT IN (SELECT kind FROM served)
  AND kind NOT IN (SELECT kind FROM "billing_jobs".paused_kinds)
GROUP BY kind
ORDER BY kind;

-- kind_pause: pause kinds: every worker leaves them out of its claim until they are
-- resumed (jobs already running finish normally). Pausing a paused kind again with a
-- reason replaces who paused it and why; without one ('' or NULL) it keeps both: a second
-- `venturi kinds pause K` (a script, another operator) erased the first one's reason.
-- $1 text[] kinds: the kinds to pause
-- $2 text paused_by: who paused them (operator identity)
-- $3 text reason: why, shown by `venturi kinds list`
-- index: paused_kinds primary key.
PREPARE billing_jobs_kind_pause(text[], text, text) AS
INSERT INTO "billing_jobs".paused_kinds AS p (kind, paused_by, reason)
SELECT DISTINCT unnest($1::text[]), $2::text, $3::text
ON CONFLICT (kind) DO UPDATE SET
    paused_by = CASE WHEN coalesce(excluded.reason, '') = '' THEN p.paused_by
                     ELSE excluded.paused_by END,
    reason = CASE WHEN coalesce(excluded.reason, '') = '' THEN p.reason ELSE excluded.reason END
RETURNING kind, paused_at, paused_by, reason;

-- kind_paused_list: the paused kinds, with who paused them, when and why.
-- index: paused_kinds primary key (a scan of a tiny table).
PREPARE billing_jobs_kind_paused_list AS
SELECT kind, paused_at, paused_by, reason FROM "billing_jobs".paused_kinds ORDER BY kind;

-- kind_resume: resume paused kinds and wake idle workers for them.
-- $1 text[] kinds: the kinds to resume
-- index: paused_kinds primary key.
PREPARE billing_jobs_kind_resume(text[]) AS
WITH resumed AS (
    DELETE FROM "billing_jobs".paused_kinds WHERE kind = ANY($1::text[])
    RETURNING kind
)
SELECT kind, pg_notify('billing_jobs_pending', kind)::text AS notified
FROM resumed
ORDER BY kind;

-- kind_waits: what holds a kind's pending jobs back, for operators' "why it waits"
-- (`venturi jobs show`, the dashboard's job page; SPEC 13): the live workers that run the
-- kind, the tightest global cap they registered with the kind's claimed count, and how
-- many of them hold as many claims of the kind as their own cap (migration 20's
-- workers.caps and global_caps, element for element with kinds; a row from before it
-- has neither, and counts as uncapped).
-- $1 text kind: the kind
-- $2 float8 liveness: seconds without a heartbeat after which a worker is gone
-- index: workers primary key (a seq scan: one row per worker run of the last day);
-- jobs_stale_idx WHERE status = 'claimed' for the claimed counts.
PREPARE billing_jobs_kind_waits(text, float8) AS
WITH live AS (
    SELECT w.id, l.cap, l.global_cap
    FROM "billing_jobs".workers w
    CROSS JOIN LATERAL unnest(w.kinds, w.caps, w.global_caps) AS l(kind, cap, global_cap)
    WHERE w.stopped_at IS NULL AND w.heartbeat_at >= now() - make_interval(secs => $2::float8)
      AND l.kind = $1::text
),
claimed AS (
    SELECT j.claim_token, count(*)::integer AS n FROM "billing_jobs".jobs j
    WHERE j.status = 'claimed' AND j.kind = $1::text
    GROUP BY j.claim_token
)
SELECT (SELECT count(*) FROM live)::integer AS serving,
       (SELECT min(l.global_cap) FROM live l)::integer AS global_cap,
       (SELECT coalesce(sum(c.n), 0) FROM claimed c)::integer AS claimed,
       (SELECT count(*) FROM live l
        WHERE l.cap IS NOT NULL
          AND l.cap <= coalesce((SELECT c.n FROM claimed c WHERE c.claim_token = l.id), 0)
       )::integer AS at_cap;

-- queue_gauges: the queue gauges of `venturi metrics` (and QueueGauges in a worker), in
-- one statement per scrape interval: per kind, pending due and scheduled, waiting
-- (workflows), claimed and expired, dead and cancelled, the oldest due job's wait, whether it is paused, how many
-- live workers register it; and on every row the fleet's live and gone workers. One row
-- with a NULL kind when there is no kind at all. Completed jobs are not counted here
-- (every finished row would be read each scrape): the workers' venturi_jobs_settled
-- counter has them.
-- $1 float8 liveness: seconds without a heartbeat after which a worker is gone
-- index: jobs_claim_idx (pending), jobs_waiting_idx, jobs_stale_idx, jobs_failed_id_idx;
-- workers and paused_kinds are small.
PREPARE billing_jobs_queue_gauges(float8) AS
WITH pending AS (
    -- jobs_claim_idx and jobs_group_claim_idx, by their included kind and visible_at.
    SELECT kind,
           count(*) FILTER (WHERE visible_at <= now()) AS due,
           count(*) FILTER (WHERE visible_at > now()) AS scheduled,
           -- How long the longest-waiting due job has been claimable (not since it was
           -- created: a job scheduled for later is not late before its time).
           extract(epoch FROM now() - min(visible_at) FILTER (WHERE visible_at <= now()))::float8
               AS oldest_due_seconds
    FROM (SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NULL
     UNION ALL
     SELECT kind, visible_at FROM "billing_jobs".jobs WHERE status = 'pending' AND grp IS NOT NULL) AS p
    GROUP BY kind
),
waiting AS (
    -- jobs_waiting_idx (kind) WHERE status = 'waiting'.
    SELECT kind, count(*) AS waiting
    FROM "billing_jobs".jobs
    WHERE status = 'waiting'
    GROUP BY kind
),
claimed AS (
    -- jobs_stale_idx WHERE status = 'claimed'.
    SELECT kind,
           count(*) AS claimed,
           count(*) FILTER (WHERE claim_expires_at < now()) AS expired
    FROM "billing_jobs".jobs
    WHERE status = 'claimed'
    GROUP BY kind
),
failed AS (
    -- jobs_failed_id_idx WHERE status IN ('dead', 'cancelled').
    SELECT kind,
           count(*) FILTER (WHERE status = 'dead') AS dead,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled
    FROM "billing_jobs".all_jobs
    WHERE status IN ('dead', 'cancelled')
    GROUP BY kind
),
registered AS (
    SELECT id, kinds,
           heartbeat_at >= now() - make_interval(secs => $1::float8) AS live
    FROM "billing_jobs".workers
    WHERE stopped_at IS NULL
),
served AS (
    SELECT kind, count(*) AS workers
    FROM registered, unnest(kinds) AS kind
    WHERE live
    GROUP BY kind
),
fleet AS (
    SELECT count(*) FILTER (WHERE live) AS workers_live,
           count(*) FILTER (WHERE NOT live) AS workers_gone
    FROM registered
),
kinds AS (
    SELECT kind FROM pending UNION SELECT kind FROM waiting UNION SELECT kind FROM claimed
    UNION SELECT kind FROM failed
    UNION SELECT kind FROM served UNION SELECT kind FROM "billing_jobs".paused_kinds
)
SELECT f.workers_live, f.workers_gone, k.kind,
       coalesce(p.due, 0) AS due,
       coalesce(p.scheduled, 0) AS scheduled,
       coalesce(w.waiting, 0) AS waiting,
       coalesce(c.claimed, 0) AS claimed,
       coalesce(c.expired, 0) AS expired,
       coalesce(x.dead, 0) AS dead,
       coalesce(x.cancelled, 0) AS cancelled,
       p.oldest_due_seconds,
       pk.kind IS NOT NULL AS paused,
       coalesce(sv.workers, 0) AS workers
FROM fleet f
LEFT JOIN kinds k ON true
LEFT JOIN pending p ON p.kind = k.kind
LEFT JOIN waiting w ON w.kind = k.kind
LEFT JOIN claimed c ON c.kind = k.kind
LEFT JOIN failed x ON x.kind = k.kind
LEFT JOIN served sv ON sv.kind = k.kind
LEFT JOIN "billing_jobs".paused_kinds pk ON pk.kind = k.kind
ORDER BY k.kind;

-- rate_spend: spend one token of a kind's shared bucket per job its claim returned (a
-- claim that returned nothing spends nothing), and say when the bucket has a whole token
-- again (0: it has one), so that the worker waits for it rather than for a notification
-- that a job visible since its enqueue never sends. Same transaction as rate_take.
-- $1 text kind: the rate-limited kind
-- $2 integer spent: jobs claimed
-- $3 float8 per_second: refill rate
-- index: rate_limits primary key.
PREPARE billing_jobs_rate_spend(text, integer, float8) AS
UPDATE "billing_jobs".rate_limits SET tokens = tokens - $2::integer WHERE kind = $1::text
RETURNING greatest(0, (1 - tokens) / $3::float8)::float8 AS wait;

-- rate_take: refill a kind's shared token bucket and lock it for this transaction;
-- returns how many whole tokens a claim may use now, and the seconds until the next one.
-- Run in the claim's transaction, followed by the claim and rate_spend.
-- $1 text kind: the rate-limited kind
-- $2 float8 per_second: refill rate
-- $3 integer burst: bucket size
-- $4 integer wanted: free slots the claim could fill
-- index: rate_limits primary key; the row lock serializes the workers' claims of the kind.
PREPARE billing_jobs_rate_take(text, float8, integer, integer) AS
INSERT INTO "billing_jobs".rate_limits AS b (kind, tokens, refilled_at)
VALUES ($1::text, $3::float8, clock_timestamp())
ON CONFLICT (kind) DO UPDATE
-- clock_timestamp(), not now(): a transaction that waited for this lock must not refill
-- from a time before the previous holder's refill.
SET tokens = least($3::float8,
                   b.tokens + greatest(0, extract(epoch FROM clock_timestamp() - b.refilled_at))
                              * $2::float8),
    refilled_at = greatest(b.refilled_at, clock_timestamp())
RETURNING least(floor(b.tokens), $4::integer)::integer AS granted,
          greatest(0, (1 - b.tokens) / $2::float8)::float8 AS wait;

-- schedule_advance_if_behind: move a schedule's latest slot forward to $2 if it is behind,
-- returning the latest slot it had (as locked: another worker's may have just committed);
-- no row when it is not behind (another worker got there first). Run in the transaction
-- that enqueues the slot's job: the row lock makes a concurrent worker wait for that
-- transaction, re-read the row and find it no longer behind, so each slot is enqueued
-- exactly once.
-- $1 text name: the schedule
-- $2 timestamptz slot: the latest slot at or before now
-- index: schedules primary key.
PREPARE billing_jobs_schedule_advance_if_behind(text, timestamptz) AS
WITH before AS (
    SELECT name, last_slot
    FROM "billing_jobs".schedules
    WHERE name = $1::text
    FOR UPDATE
)
UPDATE "billing_jobs".schedules s
SET last_slot = $2::timestamptz, updated_at = now()
FROM before
WHERE s.name = before.name AND before.last_slot < $2::timestamptz
RETURNING before.last_slot AS previous;

-- schedule_init: record a schedule seen for the first time at slot $2, without running it
-- (a schedule starts with its next slot, not with one from before it existed), with the
-- definition the slot is of, written now. Does nothing when the schedule is known.
-- $1 text name: the schedule
-- $2 timestamptz slot: the latest slot at or before now
-- $3 text expression: its cron expression (NULL: not known)
-- $4 text tz: the time zone the expression is read in (NULL: not known)
-- index: schedules primary key (the ON CONFLICT arbiter).
PREPARE billing_jobs_schedule_init(text, timestamptz, text, text) AS
INSERT INTO "billing_jobs".schedules (name, last_slot, expression, tz, defined_at)
VALUES ($1::text, $2::timestamptz, $3::text, $4::text,
        CASE WHEN $3::text IS NULL THEN NULL ELSE now() END)
ON CONFLICT (name) DO NOTHING;

-- schedule_list: the latest slot enqueued for each named schedule (NULL: never seen), the
-- cron expression and time zone it was computed in (NULL: a row an older version wrote)
-- and when that definition was written, whether the schedule's kind is paused (its slots
-- wait for the resume), and the database clock, which every worker computes its slots
-- from.
-- $1 text[] names: the schedules this worker runs
-- $2 text[] kinds: the kind of each (may be empty: paused is then false)
-- index: schedules primary key; paused_kinds primary key.
PREPARE billing_jobs_schedule_list(text[], text[]) AS
SELECT n.name, s.last_slot, s.expression, s.tz, s.defined_at,
       EXISTS (SELECT 1 FROM "billing_jobs".paused_kinds p WHERE p.kind = n.kind) AS paused,
       now() AS now
FROM unnest($1::text[], $2::text[]) AS n(name, kind)
LEFT JOIN "billing_jobs".schedules s ON s.name = n.name
WHERE n.name IS NOT NULL;

-- schedule_list_all: every recurring schedule the workers have seen, with the latest slot
-- each enqueued, and the database clock (the dashboard's /schedules).
-- index: schedules primary key (a scan of a small table).
PREPARE billing_jobs_schedule_list_all AS
SELECT name, last_slot, updated_at, now() AS now
FROM "billing_jobs".schedules
ORDER BY name;

-- schedule_redefine: give a schedule the definition $3, $4 when its row has another, one
-- written at or before $5 (a definition written later is a newer deploy's, which this
-- caller defers to). A row with another one starts over, as a new schedule, at slot $2
-- (the new definition's latest: its next slot is the first to run); a row without one
-- (an older version wrote it) takes it on and keeps its latest slot. Either way the
-- definition is written now. No row when the row already has it or one written after $5
-- (another worker got there first). Returns the definition the row had.
-- $1 text name: the schedule
-- $2 timestamptz slot: the new definition's latest slot at or before now
-- $3 text expression: its cron expression
-- $4 text tz: the time zone the expression is read in
-- $5 timestamptz started: a definition written after it is left as it is
-- index: schedules primary key.
PREPARE billing_jobs_schedule_redefine(text, timestamptz, text, text, timestamptz) AS
WITH before AS (
    SELECT name, expression, tz, defined_at
    FROM "billing_jobs".schedules
    WHERE name = $1::text
    FOR UPDATE
)
UPDATE "billing_jobs".schedules s
SET last_slot = CASE WHEN before.expression IS NULL THEN s.last_slot ELSE $2::timestamptz END,
    updated_at = CASE WHEN before.expression IS NULL THEN s.updated_at ELSE now() END,
    expression = $3::text,
    tz = $4::text,
    defined_at = now()
FROM before
WHERE s.name = before.name
  AND (before.expression, before.tz) IS DISTINCT FROM ($3::text, $4::text)
  AND (before.expression IS NULL OR before.defined_at IS NULL
       OR before.defined_at <= $5::timestamptz)
RETURNING before.expression, before.tz;

-- schema_lock: serialize concurrent `schema apply` runs on one database until commit.
PREPARE billing_jobs_schema_lock AS
SELECT pg_advisory_xact_lock(hashtext('venturi schema "billing_jobs"'));

-- schema_lock_holders: the other sessions that hold a lock on a table of the schema, oldest
-- transaction first: what `schema apply` names when it gave up waiting for its locks (an
-- application's open transaction, most often). Read after the apply rolled back, so a
-- holder that has ended since is not listed.
-- index: none (pg_locks and pg_stat_activity are views of the server's memory).
PREPARE billing_jobs_schema_lock_holders AS
SELECT a.pid, a.application_name, a.state,
       extract(epoch FROM clock_timestamp() - a.xact_start)::float8 AS open_for
FROM pg_stat_activity AS a
WHERE a.pid <> pg_backend_pid()
  AND a.pid IN (
      SELECT l.pid
      FROM pg_locks AS l
      JOIN pg_class AS c ON c.oid = l.relation
      WHERE l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND c.relnamespace = to_regnamespace('"billing_jobs"'))
ORDER BY a.xact_start NULLS LAST, a.pid;

-- schema_lock_timeout: bound how long each lock of this `schema apply` transaction is waited
-- for (SET LOCAL: it ends with the transaction). While the apply waits for a lock on jobs
-- (a migration's ACCESS EXCLUSIVE, behind an application's open transaction), its queued
-- request holds every claim and settlement behind it; bounded, they wait at most this
-- long, and the apply rolls back and tries again. The value it replaced, read first (the
-- subquery is scanned before the outer select list is computed), is put back by the same
-- statement at the end of an apply run inside a caller's transaction (Django's migrate).
-- $1 text value: the lock_timeout, as PostgreSQL reads it ('3000ms')
-- index: none (a setting).
PREPARE billing_jobs_schema_lock_timeout(text) AS
SELECT previous, set_config('lock_timeout', $1, true) AS lock_timeout
FROM (SELECT current_setting('lock_timeout') AS previous OFFSET 0) AS was;

-- schema_version_exists: whether the schema-version table exists (an applied schema).
PREPARE billing_jobs_schema_version_exists AS
SELECT to_regclass('"billing_jobs".schema_version') IS NOT NULL AS applied;

-- schema_version_get: the highest applied migration; fails with undefined_table when the
-- schema was never applied, which the caller turns into "run venturi schema apply".
PREPARE billing_jobs_schema_version_get AS
SELECT max(version) AS version FROM "billing_jobs".schema_version;

-- schema_version_list: every applied migration, for `venturi schema apply`.
PREPARE billing_jobs_schema_version_list AS
SELECT version FROM "billing_jobs".schema_version ORDER BY version;

-- schema_version_record: note a migration as applied.
-- $1 integer version: the migration number
-- $2 text name: its label
PREPARE billing_jobs_schema_version_record(integer, text) AS
INSERT INTO "billing_jobs".schema_version (version, name) VALUES ($1, $2)
ON CONFLICT (version) DO NOTHING;

-- signal_get: the payload of the signal of a name sent to a job (NULL: none yet) and the
-- job's wake_seq, read in one snapshot: a wait decided on this answer settles 'waiting'
-- only if no event came after it (job_wait_if_owned).
-- $1 bigint job_id: the job
-- $2 text name: the signal's name
-- index: primary keys of jobs and signals.
PREPARE billing_jobs_signal_get(bigint, text) AS
SELECT coalesce(j.wake_seq, 0) AS wake_seq,
       (SELECT g.payload::text FROM "billing_jobs".signals g
        WHERE g.job_id = j.id AND g.name = $2::text) AS payload
FROM "billing_jobs".all_jobs j
WHERE j.id = $1::bigint;

-- signal_send: venturi.signal: record a signal for an unfinished job; the first of a name
-- wins. A job waiting for that name becomes pending in the same UPDATE (and the update
-- trigger notifies the workers); any other unfinished job counts the event in wake_seq,
-- so that a run deciding right now to wait for it sees it (job_wait_if_owned).
-- Returns one row, sent: whether this signal was recorded.
-- $1 bigint job_id: the job to signal
-- $2 text name: the signal's name
-- $3 text payload: msgspec-encoded JSON of the payload
-- index: primary keys of jobs and signals.
PREPARE billing_jobs_signal_send(bigint, text, text) AS
WITH target AS (
    -- Locked first, so the decision below reads the row as it is now, and signals and
    -- wait settlements of this job take turns.
    SELECT id, status = 'waiting' AND wait_signal = $2::text AS wakes
    FROM "billing_jobs".jobs
    WHERE id = $1::bigint AND status IN ('pending', 'claimed', 'waiting')
    FOR NO KEY UPDATE
),
sent AS (
    INSERT INTO "billing_jobs".signals (job_id, name, payload)
    SELECT id, $2::text, $3::jsonb FROM target
    ON CONFLICT (job_id, name) DO NOTHING
    RETURNING job_id
),
bumped AS (
    UPDATE "billing_jobs".jobs j
    SET wake_seq = coalesce(j.wake_seq, 0) + 1,
        status = CASE WHEN t.wakes THEN 'pending' ELSE j.status END,
        visible_at = CASE WHEN t.wakes THEN now() ELSE j.visible_at END,
        wake_at = CASE WHEN t.wakes THEN NULL ELSE j.wake_at END
    FROM target t
    WHERE j.id = t.id AND EXISTS (SELECT 1 FROM sent)
    RETURNING j.id, j.attempt, t.wakes
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), 'woken', attempt, NULL, 'signal ' || $2::text FROM bumped WHERE wakes
)
SELECT EXISTS (SELECT 1 FROM sent) AS sent;

-- signal_send_by_operator: an operator's signal (venturi jobs signal, the dashboard's
-- Send signal): recorded as signal_send records the application's, the first of a name
-- winning, and journaled with who sent it: woken when the job was waiting for this
-- signal (it becomes pending at once), released (not a state change) when the job is
-- pending, claimed, or waiting on something else, so that its run finds the signal when
-- it gets there. Returns one row: the job's kind and status before (NULL: no such job),
-- whether the signal was recorded, whether it woke the job, and the signal the job waits
-- for (if it waits for one).
-- $1 bigint job_id: the job to signal
-- $2 text name: the signal's name
-- $3 text payload: msgspec-encoded JSON of the payload
-- $4 text operator: who sent it, for the journal's worker column
-- index: primary keys of jobs and signals.
PREPARE billing_jobs_signal_send_by_operator(bigint, text, text, text) AS
WITH target AS (
    -- Locked first, as in signal_send: signals and wait settlements take turns.
    SELECT id, status = 'waiting' AND wait_signal = $2::text AS wakes
    FROM "billing_jobs".jobs
    WHERE id = $1::bigint AND status IN ('pending', 'claimed', 'waiting')
    FOR NO KEY UPDATE
),
sent AS (
    INSERT INTO "billing_jobs".signals (job_id, name, payload)
    SELECT id, $2::text, $3::jsonb FROM target
    ON CONFLICT (job_id, name) DO NOTHING
    RETURNING job_id
),
bumped AS (
    UPDATE "billing_jobs".jobs j
    SET wake_seq = coalesce(j.wake_seq, 0) + 1,
        status = CASE WHEN t.wakes THEN 'pending' ELSE j.status END,
        visible_at = CASE WHEN t.wakes THEN now() ELSE j.visible_at END,
        wake_at = CASE WHEN t.wakes THEN NULL ELSE j.wake_at END
    FROM target t
    WHERE j.id = t.id AND EXISTS (SELECT 1 FROM sent)
    RETURNING j.id, j.attempt, t.wakes
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, now(), CASE WHEN wakes THEN 'woken' ELSE 'released' END, attempt, $4::text,
           'signal ' || $2::text || CASE WHEN wakes THEN ' sent by an operator'
                                         ELSE ' sent by an operator, not waited for yet' END
    FROM bumped
)
-- Read from the statement's snapshot: status is the one before.
SELECT j.kind, j.status AS was, j.wait_signal,
       EXISTS (SELECT 1 FROM sent) AS sent,
       coalesce((SELECT wakes FROM bumped), false) AS woke
FROM (SELECT $1::bigint AS id) input
LEFT JOIN "billing_jobs".all_jobs j ON j.id = input.id;

-- step_list: a workflow job's recorded steps, loaded once per run by its first workflow
-- primitive, with the job's wake_seq as it was before any of them looked (a wait that
-- compares against an older wake_seq can only wake too often, never too seldom). One
-- row with NULL name when nothing is recorded yet. now: the database's clock, which the
-- run's timers are decided by (the worker's own clock may be skewed).
-- $1 bigint job_id: the job
-- index: primary keys of jobs and steps (job_id, name).
PREPARE billing_jobs_step_list(bigint) AS
SELECT now() AS now, coalesce(j.wake_seq, 0) AS wake_seq, s.name, s.value::text AS value, s.wake_at
FROM "billing_jobs".all_jobs j
LEFT JOIN "billing_jobs".steps s ON s.job_id = j.id
WHERE j.id = $1::bigint;

-- step_record: record a step's value once. If another run recorded the name first (two
-- runs of one job after a lost lease), that value wins and is returned to both: DO
-- UPDATE rather than DO NOTHING so that the statement always returns the recorded row,
-- also one committed after its snapshot (the no-op update waits for the other writer and
-- reads its row). inserted says whose value it is.
-- $1 bigint job_id: the job
-- $2 text name: the step's name (unique within the job)
-- $3 text value: msgspec-encoded JSON of the step's return value
-- $4 timestamptz wake_at: a timer's wake time (NULL for a plain step)
-- index: primary key of steps (job_id, name), the ON CONFLICT arbiter.
PREPARE billing_jobs_step_record(bigint, text, text, timestamptz) AS
INSERT INTO "billing_jobs".steps AS st (job_id, name, value, wake_at)
VALUES ($1::bigint, $2::text, $3::jsonb, $4::timestamptz)
ON CONFLICT (job_id, name) DO UPDATE SET job_id = st.job_id
-- xmax is 0 on a row this statement inserted, the locking transaction on one it found.
RETURNING st.value::text AS value, st.wake_at, st.xmax = 0 AS inserted;

-- transaction_deadlines: the server's side of the client's statement deadline, for the
-- rest of this transaction only (set_config's is_local; a transaction pooler keeps no
-- session state). A client whose network froze would otherwise hold the transaction's
-- row locks until the server's TCP keepalive gives up, two hours by default.
-- $1 text statement_ms: statement_timeout, milliseconds
-- $2 text idle_ms: idle_in_transaction_session_timeout, milliseconds
PREPARE billing_jobs_transaction_deadlines(text, text) AS
SELECT set_config('statement_timeout', $1::text, true) AS statement_timeout,
       set_config('idle_in_transaction_session_timeout', $2::text, true) AS idle_timeout;

-- transaction_deadlines_now: this transaction's statement_timeout and
-- idle_in_transaction_session_timeout, as transaction_deadlines takes them back:
-- testing.drain on a Connection inside the caller's transaction runs a claim's
-- transaction as a savepoint, whose set_config(..., true) lasts to the caller's end.
PREPARE billing_jobs_transaction_deadlines_now AS
SELECT current_setting('statement_timeout') AS statement_timeout,
       current_setting('idle_in_transaction_session_timeout') AS idle_timeout;

-- worker_heartbeat: a running worker is alive; its one statement per heartbeat. No row
-- back means the row is missing (pruned while the worker was cut off): register again.
-- $1 uuid id: the run's claim token
-- It clears stopped_at too: only an operator's `venturi recover --worker` sets it on a run
-- that still beats (--force, or a network that came back), and a run that beats is
-- running. Its own clean stop (worker_stop) comes after its last heartbeat.
-- index: workers primary key (a HOT update: no indexed column changes).
PREPARE billing_jobs_worker_heartbeat(uuid) AS
UPDATE "billing_jobs".workers SET heartbeat_at = now(), stopped_at = NULL WHERE id = $1::uuid
RETURNING true;

-- worker_list: the registered workers, each live, gone (no heartbeat for $1 seconds) or
-- stopped, with the claims it holds; then, as 'unregistered', the holders of claims whose
-- token no row names (a venturi from before the registry, or a pruned row).
-- $1 float8 liveness: seconds without a heartbeat after which a worker is gone
-- $2 text match: only the worker whose id starts with this, or whose name is this (NULL: all)
-- index: workers primary key; jobs_stale_idx WHERE status = 'claimed'.
PREPARE billing_jobs_worker_list(float8, text) AS
WITH claims AS (
    SELECT claim_token, claimed_by,
           count(*) AS claims,
           count(*) FILTER (WHERE claim_expires_at < now()) AS expired,
           min(claimed_at) AS oldest_claim_at,
           array_agg(DISTINCT kind ORDER BY kind) AS claimed_kinds
    FROM "billing_jobs".jobs
    WHERE status = 'claimed'
    GROUP BY claim_token, claimed_by
),
listed AS (
    SELECT w.id, w.name, w.host, w.pid, w.kinds, w.concurrency, w.version, w.started_at,
           w.heartbeat_at, w.stopped_at,
           CASE WHEN w.stopped_at IS NOT NULL THEN 'stopped'
                WHEN w.heartbeat_at < now() - make_interval(secs => $1::float8) THEN 'gone'
                ELSE 'live' END AS state,
           coalesce(sum(c.claims), 0)::bigint AS claims,
           coalesce(sum(c.expired), 0)::bigint AS expired,
           min(c.oldest_claim_at) AS oldest_claim_at
    FROM "billing_jobs".workers w
    LEFT JOIN claims c ON c.claim_token = w.id
    GROUP BY w.id
    UNION ALL
    SELECT c.claim_token, coalesce(c.claimed_by, '?'), NULL, NULL, c.claimed_kinds, NULL, NULL,
           NULL, NULL, NULL, 'unregistered', c.claims, c.expired, c.oldest_claim_at
    FROM claims c
    WHERE NOT EXISTS (SELECT 1 FROM "billing_jobs".workers w WHERE w.id = c.claim_token)
)
SELECT id, name, host, pid, kinds, concurrency, version, started_at, heartbeat_at,
       stopped_at, state, claims, expired, oldest_claim_at,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_seconds
FROM listed
WHERE $2::text IS NULL OR starts_with(id::text, lower($2::text)) OR name = $2::text
ORDER BY CASE state WHEN 'live' THEN 0 WHEN 'gone' THEN 1 WHEN 'unregistered' THEN 2 ELSE 3 END,
         started_at DESC NULLS LAST, name, id;

-- worker_prune: forget the rows of workers that stopped, or were last heard of, more than
-- $1 seconds ago (run as a worker registers, and by Retention). A gone worker that still
-- holds claims is kept: its row is how an operator finds and recovers them.
-- $1 float8 older_than: seconds since the stop or the last heartbeat
-- index: none; the table holds one row per recent worker run.
PREPARE billing_jobs_worker_prune(float8) AS
WITH pruned AS (
    DELETE FROM "billing_jobs".workers w
    WHERE coalesce(w.stopped_at, w.heartbeat_at) < now() - make_interval(secs => $1::float8)
      AND NOT EXISTS (
          SELECT 1 FROM "billing_jobs".jobs j WHERE j.status = 'claimed' AND j.claim_token = w.id)
    RETURNING 1
)
SELECT count(*) FROM pruned;

-- worker_register: record a worker run as it starts (`venturi workers`). Run again by the
-- heartbeat when the row is missing (pruned, or the first insert failed), so it is an
-- upsert that leaves started_at alone.
-- $1 uuid id: the run's claim token, so its claims are the jobs claimed under it
-- $2 text name: the worker's identity (claimed_by)
-- $3 text host: the host name
-- $4 integer pid: the process id
-- $5 text[] kinds: the kinds it registers, sorted
-- $6 integer concurrency: its in-flight slots
-- $7 text version: the venturi version it runs
-- $8 integer[] caps: each kind's per-worker cap, element for element with kinds (NULL: none)
-- $9 integer[] global_caps: each kind's global cap, likewise
-- index: workers primary key.
PREPARE billing_jobs_worker_register(uuid, text, text, integer, text[], integer, text, integer[], integer[]) AS
INSERT INTO "billing_jobs".workers (id, name, host, pid, kinds, concurrency, version, caps, global_caps)
VALUES ($1::uuid, $2, $3, $4::integer, $5::text[], $6::integer, $7, $8::integer[],
        $9::integer[])
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), stopped_at = NULL;

-- worker_stop: a worker run stopped cleanly (its jobs settled or released).
-- $1 uuid id: the run's claim token
-- index: workers primary key.
PREPARE billing_jobs_worker_stop(uuid) AS
UPDATE "billing_jobs".workers SET stopped_at = now(), heartbeat_at = now() WHERE id = $1::uuid;

-- workflow_graph_get: the workflow a job belongs to, for the dashboard's graph: the jobs
-- reachable from it through parents, children and venturi.Workflow dependencies (either
-- way), nearest first, $2 of them drawn (id, kind, status, parent_id) with the
-- dependency edges among them; and how many were reached in all, up to $3. One row.
-- The walk is breadth first (a recursive CTE's UNION: each job once, each level after
-- the one before), so the job itself, its parent, children and dependencies come first,
-- and it stops at $3 jobs: a parent of a million children costs $3 probes, not a million.
-- Ids of purged jobs (a dependency retention removed) are not followed.
-- $1 bigint id: the job
-- $2 integer drawn: how many jobs to return at most
-- $3 integer cap: how many jobs to reach at most
-- index: jobs_pkey and jobs_parent_idx (parents and children), dependencies_pkey and
-- dependencies_depends_on_idx (both directions).
PREPARE billing_jobs_workflow_graph_get(bigint, integer, integer) AS
WITH RECURSIVE reach(id) AS (
    SELECT j.id FROM "billing_jobs".all_jobs j WHERE j.id = $1::bigint
    UNION
    SELECT n.id
    FROM reach r
    CROSS JOIN LATERAL (
        SELECT j.parent_id AS id FROM "billing_jobs".all_jobs j
        WHERE j.id = r.id AND j.parent_id IS NOT NULL
        UNION ALL
        SELECT k.id FROM "billing_jobs".all_jobs k WHERE k.parent_id = r.id
        UNION ALL
        SELECT d.depends_on FROM "billing_jobs".dependencies d WHERE d.job_id = r.id
        UNION ALL
        SELECT e.job_id FROM "billing_jobs".dependencies e WHERE e.depends_on = r.id
    ) AS n
    -- Each table probed by its key (an EXISTS over the view became a hash of every id).
    WHERE EXISTS (SELECT 1 FROM "billing_jobs".jobs x WHERE x.id = n.id)
       OR EXISTS (SELECT 1 FROM "billing_jobs".jobs_history x WHERE x.id = n.id)
),
reached AS MATERIALIZED (
    SELECT id FROM reach LIMIT $3::integer
),
drawn AS MATERIALIZED (
    SELECT id FROM reached LIMIT $2::integer
)
SELECT (SELECT count(*) FROM reached)::integer AS reached,
       (SELECT coalesce(json_agg(json_build_object('id', j.id, 'kind', j.kind,
                                                   'status', j.status,
                                                   'parent_id', j.parent_id)
                                 ORDER BY j.id), '[]')
        FROM drawn w JOIN "billing_jobs".all_jobs j ON j.id = w.id)::text AS nodes,
       (SELECT coalesce(json_agg(json_build_array(d.depends_on, d.job_id)
                                 ORDER BY d.depends_on, d.job_id), '[]')
        -- Arrays, not IN (subquery): joined, the planner read the whole table.
        FROM "billing_jobs".dependencies d
        WHERE d.job_id = ANY (ARRAY(SELECT id FROM drawn))
          AND d.depends_on = ANY (ARRAY(SELECT id FROM drawn)))::text AS edges;

-- workflow_insert: venturi.Workflow: insert a graph of jobs and its edges in one
-- statement (inside the caller's transaction). Ids are drawn beforehand (job_ids_draw)
-- so that the edges can name them. A node with dependencies is inserted 'waiting' for
-- them (wait_for, wait_count): the last to complete makes it pending
-- (workflow_settled); a node others come after is marked linked. Only pending
-- rows notify (jobs_notify_insert).
-- $1 bigint[] ids: each node's drawn id
-- $2 text[] kinds: the task kind of each node
-- $3 text[] carries: msgspec-encoded JSON of each node's carry
-- $4 smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW
-- $5 timestamptz[] ats: visible from (NULL: use afters)
-- $6 float8[] afters: visible after seconds (NULL: now)
-- $7 integer[] max_failures: each task's failure backstop
-- $8 float8[] backoff_bases: each task's declared Backoff, for recovery (NULL: none)
-- $9 float8[] backoff_factors: its growth per failure
-- $10 float8[] backoff_caps: its longest delay in seconds
-- $11 boolean[] backoff_jitters: whether it is half-jittered
-- $12 text[] wait_fors: each node's dependencies as an array literal ('{1,2}'; NULL: none)
-- $13 boolean[] linked: whether any node comes after it (NULL: none does)
-- $14 text traceparent: W3C trace context of the enqueuing span (NULL: none)
-- $15 bigint[] edge_jobs: the dependent of each edge
-- $16 text[] edge_names: the node name of each edge's dependency
-- $17 bigint[] edge_depends_on: the dependency of each edge
-- $18 text[] grps: each node's group (NULL: none; SPEC 13)
-- index: none read; the primary keys of jobs and dependencies.
PREPARE billing_jobs_workflow_insert(bigint[], text[], text[], smallint[], timestamptz[], float8[], integer[], float8[], float8[], float8[], boolean[], text[], boolean[], text, bigint[], text[], bigint[], text[]) AS
WITH inserted AS (
    INSERT INTO "billing_jobs".jobs (id, kind, carry, priority, visible_at, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              traceparent, status, wait_for, wait_count, linked, grp)
    SELECT id, kind, carry::jsonb, priority,
           coalesce(at, now() + make_interval(secs => coalesce(after, 0))), max_failures,
           backoff_base, backoff_factor, backoff_cap, backoff_jitter, $14::text,
           CASE WHEN wait_for IS NULL THEN 'pending' ELSE 'waiting' END,
           wait_for::bigint[], cardinality(wait_for::bigint[]), linked, grp
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[],
                $6::float8[], $7::integer[], $8::float8[], $9::float8[], $10::float8[],
                $11::boolean[], $12::text[], $13::boolean[], $18::text[])
         AS u(id, kind, carry, priority, at, after, max_failures, backoff_base,
              backoff_factor, backoff_cap, backoff_jitter, wait_for, linked, grp)
    RETURNING id
),
edges AS (
    INSERT INTO "billing_jobs".dependencies (job_id, name, depends_on)
    SELECT job_id, name, depends_on
    FROM unnest($15::bigint[], $16::text[], $17::bigint[]) AS e(job_id, name, depends_on)
)
SELECT count(*)::integer AS inserted FROM inserted;

-- workflow_list_newer: the dashboard's workflows list paging back to newer roots: the
-- oldest roots above the cursor, oldest first (the caller shows them newest first).
-- $1 text status: only roots of this status (NULL: any)
-- $2 text kind: only roots of this kind (NULL: any)
-- $3 bigint after_id: only roots with a greater id, the keyset cursor
-- $4 integer max_rows: how many to return at most
-- $5 integer cap: count at most this many steps, children and later nodes per root
-- $6 text search: kind prefix, key, id, or words of its last error or carry (NULL: any)
-- index: as workflow_list_older, forwards.
PREPARE billing_jobs_workflow_list_newer(text, text, bigint, integer, integer, text) AS
WITH RECURSIVE walk(id) AS (
    SELECT least(
        (SELECT min(s.job_id) FROM "billing_jobs".steps s WHERE s.job_id > $3::bigint),
        (SELECT min(g.job_id) FROM "billing_jobs".signals g WHERE g.job_id > $3::bigint),
        (SELECT min(d.depends_on) FROM "billing_jobs".dependencies d
         WHERE d.depends_on > $3::bigint))
    UNION ALL
    SELECT least(
        (SELECT min(s.job_id) FROM "billing_jobs".steps s WHERE s.job_id > w.id),
        (SELECT min(g.job_id) FROM "billing_jobs".signals g WHERE g.job_id > w.id),
        (SELECT min(d.depends_on) FROM "billing_jobs".dependencies d
         WHERE d.depends_on > w.id))
    FROM walk w
    WHERE w.id IS NOT NULL
),
roots AS (
    SELECT j.*
    FROM walk w
    CROSS JOIN LATERAL (
        -- LIMIT 1 (the id is unique) keeps this one probe of the primary key per id
        -- walked: joined, the planner hashed the whole jobs table when it guessed the
        -- walk long.
        SELECT j.id, j.kind, j.status, j.created_at, j.finished_at,
               greatest(j.created_at, j.claimed_at, j.finished_at) AS updated_at,
               CASE WHEN j.status = 'waiting' THEN j.wait_signal END AS wait_signal,
               CASE WHEN j.status = 'waiting' THEN j.wake_at END AS wake_at,
               CASE WHEN j.status = 'waiting' THEN coalesce(j.wait_count, 0) ELSE 0 END
                   AS wait_count
        FROM "billing_jobs".all_jobs j
        WHERE j.id = w.id
          AND j.parent_id IS NULL
          AND NOT EXISTS (SELECT 1 FROM "billing_jobs".dependencies a WHERE a.job_id = j.id)
          AND ($1::text IS NULL OR j.status = $1::text)
          AND ($2::text IS NULL OR j.kind = $2::text)
          -- strpos, not LIKE: the search is text, never a pattern.
          AND ($6::text IS NULL
               OR starts_with(lower(j.kind), lower($6::text))
               OR j.key = $6::text
               OR j.id::text = $6::text
               OR strpos(lower(j.last_error), lower($6::text)) > 0
               OR strpos(lower(j.carry::text), lower($6::text)) > 0)
        LIMIT 1
    ) AS j
    WHERE w.id IS NOT NULL
    LIMIT $4::integer
)
SELECT r.id, r.kind, r.status, r.created_at, r.updated_at, r.finished_at,
       r.wait_signal, r.wake_at, r.wait_count,
       -- A primitive's internal records (named with chr(31): a signal's deadline) are
       -- no steps.
       (SELECT count(*) FROM (SELECT 1 FROM "billing_jobs".steps s
                              WHERE s.job_id = r.id AND strpos(s.name, chr(31)) = 0
                              LIMIT $5::integer) AS x)::integer AS steps,
       c.total::integer AS children, c.completed::integer AS children_completed,
       c.failed::integer AS children_failed,
       n.total::integer AS nodes_after, n.completed::integer AS nodes_after_completed,
       n.failed::integer AS nodes_after_failed
FROM roots r
CROSS JOIN LATERAL (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE x.status = 'completed') AS completed,
           count(*) FILTER (WHERE x.status IN ('dead', 'cancelled')) AS failed
    FROM (SELECT k.status FROM "billing_jobs".all_jobs k WHERE k.parent_id = r.id LIMIT $5::integer) AS x
) AS c
CROSS JOIN LATERAL (
    -- The nodes after this one, transitively (a Workflow graph's other nodes), as an
    -- array of ids: joined to jobs, the planner hashed the whole table.
    SELECT count(*) AS total,
           count(*) FILTER (WHERE k.status = 'completed') AS completed,
           count(*) FILTER (WHERE k.status IN ('dead', 'cancelled')) AS failed
    FROM "billing_jobs".all_jobs k
    WHERE k.id = ANY (ARRAY(
        WITH RECURSIVE later(id) AS (
            SELECT d.job_id FROM "billing_jobs".dependencies d WHERE d.depends_on = r.id
            UNION
            -- A LIMIT keeps each step an index probe per node (joined, the planner
            -- hashed the whole dependencies table for each root).
            SELECT n.job_id
            FROM later l
            CROSS JOIN LATERAL (SELECT d.job_id FROM "billing_jobs".dependencies d
                                WHERE d.depends_on = l.id LIMIT $5::integer) AS n
        )
        SELECT id FROM later LIMIT $5::integer))
) AS n
ORDER BY r.id;

-- workflow_list_older: the dashboard's workflows list (/workflows, /api/workflows): the
-- newest workflow roots a filter matches, one page at a time, paging to older ones; each
-- with its progress (steps recorded; children and later Workflow nodes, each counted
-- by outcome up to $5) and what it waits for.
-- $1 text status: only roots of this status (NULL: any)
-- $2 text kind: only roots of this kind (NULL: any)
-- $3 bigint before_id: only roots with a smaller id, the keyset cursor (NULL: the newest)
-- $4 integer max_rows: how many to return at most
-- $5 integer cap: count at most this many steps, children and later nodes per root
-- $6 text search: kind prefix, key, id, or words of its last error or carry (NULL: any)
-- index: steps_pkey, signals_pkey and dependencies_depends_on_idx (a skip scan: one
-- probe each per workflow id, backwards); jobs_pkey for each root; dependencies_pkey for
-- its own dependencies; jobs_parent_idx for its children.
PREPARE billing_jobs_workflow_list_older(text, text, bigint, integer, integer, text) AS
WITH RECURSIVE walk(id) AS (
    SELECT greatest(
        (SELECT max(s.job_id) FROM "billing_jobs".steps s WHERE s.job_id < coalesce($3::bigint, 9223372036854775807)),
        (SELECT max(g.job_id) FROM "billing_jobs".signals g WHERE g.job_id < coalesce($3::bigint, 9223372036854775807)),
        (SELECT max(d.depends_on) FROM "billing_jobs".dependencies d
         WHERE d.depends_on < coalesce($3::bigint, 9223372036854775807)))
    UNION ALL
    SELECT greatest(
        (SELECT max(s.job_id) FROM "billing_jobs".steps s WHERE s.job_id < w.id),
        (SELECT max(g.job_id) FROM "billing_jobs".signals g WHERE g.job_id < w.id),
        (SELECT max(d.depends_on) FROM "billing_jobs".dependencies d
         WHERE d.depends_on < w.id))
    FROM walk w
    WHERE w.id IS NOT NULL
),
roots AS (
    SELECT j.*
    FROM walk w
    CROSS JOIN LATERAL (
        -- LIMIT 1 (the id is unique) keeps this one probe of the primary key per id
        -- walked: joined, the planner hashed the whole jobs table when it guessed the
        -- walk long.
        SELECT j.id, j.kind, j.status, j.created_at, j.finished_at,
               greatest(j.created_at, j.claimed_at, j.finished_at) AS updated_at,
               CASE WHEN j.status = 'waiting' THEN j.wait_signal END AS wait_signal,
               CASE WHEN j.status = 'waiting' THEN j.wake_at END AS wake_at,
               CASE WHEN j.status = 'waiting' THEN coalesce(j.wait_count, 0) ELSE 0 END
                   AS wait_count
        FROM "billing_jobs".all_jobs j
        WHERE j.id = w.id
          AND j.parent_id IS NULL
          AND NOT EXISTS (SELECT 1 FROM "billing_jobs".dependencies a WHERE a.job_id = j.id)
          AND ($1::text IS NULL OR j.status = $1::text)
          AND ($2::text IS NULL OR j.kind = $2::text)
          -- strpos, not LIKE: the search is text, never a pattern.
          AND ($6::text IS NULL
               OR starts_with(lower(j.kind), lower($6::text))
               OR j.key = $6::text
               OR j.id::text = $6::text
               OR strpos(lower(j.last_error), lower($6::text)) > 0
               OR strpos(lower(j.carry::text), lower($6::text)) > 0)
        LIMIT 1
    ) AS j
    WHERE w.id IS NOT NULL
    LIMIT $4::integer
)
SELECT r.id, r.kind, r.status, r.created_at, r.updated_at, r.finished_at,
       r.wait_signal, r.wake_at, r.wait_count,
       -- A primitive's internal records (named with chr(31): a signal's deadline) are
       -- no steps.
       (SELECT count(*) FROM (SELECT 1 FROM "billing_jobs".steps s
                              WHERE s.job_id = r.id AND strpos(s.name, chr(31)) = 0
                              LIMIT $5::integer) AS x)::integer AS steps,
       c.total::integer AS children, c.completed::integer AS children_completed,
       c.failed::integer AS children_failed,
       n.total::integer AS nodes_after, n.completed::integer AS nodes_after_completed,
       n.failed::integer AS nodes_after_failed
FROM roots r
CROSS JOIN LATERAL (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE x.status = 'completed') AS completed,
           count(*) FILTER (WHERE x.status IN ('dead', 'cancelled')) AS failed
    FROM (SELECT k.status FROM "billing_jobs".all_jobs k WHERE k.parent_id = r.id LIMIT $5::integer) AS x
) AS c
CROSS JOIN LATERAL (
    -- The nodes after this one, transitively (a Workflow graph's other nodes), as an
    -- array of ids: joined to jobs, the planner hashed the whole table.
    SELECT count(*) AS total,
           count(*) FILTER (WHERE k.status = 'completed') AS completed,
           count(*) FILTER (WHERE k.status IN ('dead', 'cancelled')) AS failed
    FROM "billing_jobs".all_jobs k
    WHERE k.id = ANY (ARRAY(
        WITH RECURSIVE later(id) AS (
            SELECT d.job_id FROM "billing_jobs".dependencies d WHERE d.depends_on = r.id
            UNION
            -- A LIMIT keeps each step an index probe per node (joined, the planner
            -- hashed the whole dependencies table for each root).
            SELECT n.job_id
            FROM later l
            CROSS JOIN LATERAL (SELECT d.job_id FROM "billing_jobs".dependencies d
                                WHERE d.depends_on = l.id LIMIT $5::integer) AS n
        )
        SELECT id FROM later LIMIT $5::integer))
) AS n
ORDER BY r.id DESC;
