-- Runtime statements, as PREPAREd by the worker. Parameters are $n binds.

-- job_claim: recover expired claims, then claim up to $5 eligible jobs (ADR 3).
-- $1 text claimed_by: identity stamped on every claimed row (host:pid)
-- $2 text[] kinds: the claim filter (registered kinds minus those at their cap)
-- $3 float8[] leases: lease in seconds of each kind in $2, same order
-- $4 smallint priority_floor: 0 takes every tier; 1 or 2 reserves the claim for lower tiers
-- $5 integer claim_limit: free slots to fill; the worker starts every claimed job at once
-- $6 float8 backoff_base: recovery backoff, seconds of the first
-- $7 float8 backoff_factor: recovery backoff growth per failure
-- $8 float8 backoff_cap: recovery backoff ceiling in seconds
-- index: jobs_claim_idx (pending rows by priority, created_at); jobs_stale_idx for recovery.
PREPARE billing_jobs_job_claim(text, text[], float8[], smallint, integer, float8, float8, float8) AS
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
    SET status = CASE WHEN j.failures + 1 >= j.max_failures THEN 'dead' ELSE 'pending' END,
        failures = j.failures + 1,
        -- least() on the exponent too: power() overflows float8 long before 1000 failures.
        visible_at = now() + make_interval(
            secs => least($8, $6 * power($7, least(j.failures, 64)))),
        finished_at = CASE WHEN j.failures + 1 >= j.max_failures THEN now() END,
        claim_expires_at = NULL,
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
),
candidates AS (
    SELECT id FROM "billing_jobs".jobs
    WHERE status = 'pending'
      -- Delayed work (backoff, paused resume, scheduled) stays invisible until its time.
      AND visible_at <= now()
      -- Only kinds this worker can run and that are under their cap.
      AND kind = ANY($2)
      -- Anti-starvation (ADR 22): a raised floor gives a lower tier this claim.
      AND priority >= $4
    ORDER BY priority, created_at, id
    LIMIT $5
    -- Concurrent claims take distinct rows without waiting on each other.
    FOR UPDATE SKIP LOCKED
)
UPDATE "billing_jobs".jobs j
SET status = 'claimed',
    claimed_by = $1,
    claimed_at = now(),
    attempt = j.attempt + 1,
    -- The lease begins now, when the work begins (the worker starts it at once).
    claim_expires_at = now() + make_interval(secs => lease.seconds)
FROM candidates, unnest($2::text[], $3::float8[]) AS lease(kind, seconds)
WHERE j.id = candidates.id AND lease.kind = j.kind
RETURNING j.id, j.kind, j.priority, j.carry::text AS carry, j.attempt, j.failures,
          j.max_failures, j.created_at, j.claim_expires_at;

-- job_complete_many_if_owned: settle finished jobs as completed, only where this worker
-- still holds the same claim; returns the ids it settled (a missing id lost its claim).
-- $1 text claimed_by: this worker's identity
-- $2 bigint[] ids: the jobs
-- $3 integer[] attempts: the claim (attempt number) each job was run under
-- $4 text[] results: msgspec-encoded JSON result of each job (NULL: none)
-- index: primary key. No journal row: completion is read off the row (SPEC 5).
PREPARE billing_jobs_job_complete_many_if_owned(text, bigint[], integer[], text[]) AS
UPDATE "billing_jobs".jobs j
SET status = 'completed',
    finished_at = now(),
    claim_expires_at = NULL,
    result = done.result::jsonb
FROM unnest($2::bigint[], $3::integer[], $4::text[]) AS done(id, attempt, result)
WHERE j.id = done.id
  -- The ownership guard: a reclaimed job (new attempt or new owner) is left alone.
  AND j.status = 'claimed' AND j.claimed_by = $1 AND j.attempt = done.attempt
RETURNING j.id;

-- job_counts: how many jobs of each kind are in each status (the demo's summary, stats).
-- $1 bigint[] ids: only these jobs (NULL: every job)
-- index: primary key for $1; otherwise a sequential scan, meant for operators.
PREPARE billing_jobs_job_counts(bigint[]) AS
SELECT kind, status, count(*) AS jobs
FROM "billing_jobs".jobs
WHERE $1::bigint[] IS NULL OR id = ANY($1)
GROUP BY kind, status
ORDER BY kind, status;

-- job_dead_if_owned: settle straight to dead (the handler returned dead, or its carry no
-- longer decodes); not counted as a failure.
-- $1 text claimed_by: this worker's identity
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text reason: why, kept as last_error
-- index: primary key.
PREPARE billing_jobs_job_dead_if_owned(text, bigint, integer, text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'dead', finished_at = now(), claim_expires_at = NULL, last_error = $4
    WHERE j.id = $2 AND j.status = 'claimed' AND j.claimed_by = $1 AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, $1, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'dead', attempt, $1, $4 FROM settled
)
SELECT id FROM settled;

-- job_fail_if_owned: settle a failed execution (a raised exception, a retry outcome, a
-- timeout): failures + 1, then pending after the delay, or dead at the backstop.
-- $1 text claimed_by: this worker's identity
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text event: 'failed', 'retried' or 'timed-out'
-- $5 text error: what went wrong (message and traceback), kept as last_error
-- $6 text carry: the carry to keep (NULL: keep the pre-run carry)
-- $7 float8 delay: seconds before the job is visible again
-- $8 boolean force_dead: settle dead now (failures_to_dead) instead of retrying
-- index: primary key.
PREPARE billing_jobs_job_fail_if_owned(text, bigint, integer, text, text, text, float8, boolean) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET failures = j.failures + 1,
        status = CASE WHEN $8 OR j.failures + 1 >= j.max_failures THEN 'dead' ELSE 'pending' END,
        finished_at = CASE WHEN $8 OR j.failures + 1 >= j.max_failures THEN now() END,
        carry = coalesce($6::jsonb, j.carry),
        visible_at = now() + make_interval(secs => $7),
        claim_expires_at = NULL,
        last_error = $5
    WHERE j.id = $2 AND j.status = 'claimed' AND j.claimed_by = $1 AND j.attempt = $3
    RETURNING j.id, j.status, j.attempt, j.failures, j.max_failures, j.claimed_at
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, $1, NULL FROM settled
    UNION ALL
    SELECT id, now(), $4, attempt, $1, $5 FROM settled
    UNION ALL
    SELECT id, now(), 'dead', attempt, $1,
           CASE WHEN $8 THEN 'failures_to_dead: a failed execution settles dead'
                ELSE 'failure backstop reached (' || failures || ' of ' || max_failures || ')'
           END
    FROM settled WHERE status = 'dead'
)
SELECT id, status FROM settled;

-- job_get: one job's row, with JSON columns as text for the caller's decoder.
-- $1 bigint id: the job
-- index: primary key.
PREPARE billing_jobs_job_get(bigint) AS
SELECT id, kind, status, priority, carry::text AS carry, key, attempt, failures,
       max_failures, created_at, visible_at, claimed_at, claimed_by, claim_expires_at,
       finished_at, result::text AS result, last_error
FROM "billing_jobs".jobs
WHERE id = $1;

-- job_insert: enqueue one job, or return the unfinished job that already holds its key.
-- $1 text kind: the task kind
-- $2 text carry: msgspec-encoded JSON, validated by the caller
-- $3 smallint priority: 0 HIGH, 1 NORMAL, 2 LOW
-- $4 timestamptz at: visible from this instant (NULL: use $5)
-- $5 float8 after: visible after this many seconds (NULL and $4 NULL: now)
-- $6 text key: de-duplication key (NULL: none)
-- $7 integer max_failures: the task's failure backstop
-- index: jobs_key_idx is the ON CONFLICT arbiter and finds the existing job.
PREPARE billing_jobs_job_insert(text, text, smallint, timestamptz, float8, text, integer) AS
WITH inserted AS (
    INSERT INTO "billing_jobs".jobs (kind, carry, priority, visible_at, key, max_failures)
    VALUES ($1, $2::jsonb, $3, coalesce($4, now() + make_interval(secs => coalesce($5, 0))),
            $6, $7)
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed')
    DO NOTHING
    RETURNING id
)
SELECT id FROM inserted
UNION ALL
-- Reached only on a key conflict. A conflicting row committed after this statement's
-- snapshot is invisible here; the caller then runs the statement again.
SELECT id FROM "billing_jobs".jobs
WHERE $6::text IS NOT NULL AND kind = $1 AND key = $6 AND status IN ('pending', 'claimed')
LIMIT 1;

-- job_insert_many: enqueue many jobs in one statement; returns one id per input row, in
-- input order (an existing unfinished job's id where a key was already held).
-- $1 text[] kinds: the task kind of each row
-- $2 text[] carries: msgspec-encoded JSON of each row
-- $3 smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW
-- $4 timestamptz[] ats: visible from (NULL: use afters)
-- $5 float8[] afters: visible after seconds (NULL: now)
-- $6 text[] keys: de-duplication keys (NULL: none)
-- $7 integer[] max_failures: each task's failure backstop
-- index: jobs_key_idx (arbiter and lookup of existing keys).
PREPARE billing_jobs_job_insert_many(text[], text[], smallint[], timestamptz[], float8[], text[], integer[]) AS
WITH input AS (
    -- Ids are drawn up front so that each input row can be matched to what was inserted.
    SELECT nextval(pg_get_serial_sequence('"billing_jobs".jobs', 'id')) AS id, u.*
    FROM unnest($1::text[], $2::text[], $3::smallint[], $4::timestamptz[], $5::float8[],
                $6::text[], $7::integer[])
         WITH ORDINALITY AS u(kind, carry, priority, at, after, key, max_failures, ord)
),
inserted AS (
    INSERT INTO "billing_jobs".jobs (id, kind, carry, priority, visible_at, key, max_failures)
    SELECT id, kind, carry::jsonb, priority,
           coalesce(at, now() + make_interval(secs => coalesce(after, 0))), key, max_failures
    FROM input
    ORDER BY ord
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed')
    DO NOTHING
    RETURNING id, kind, key
)
SELECT coalesce(mine.id, same_batch.id, existing.id) AS id
FROM input
LEFT JOIN inserted mine ON mine.id = input.id
-- Two rows of one batch with the same key: the later one gets the earlier one's id.
LEFT JOIN inserted same_batch
       ON input.key IS NOT NULL AND same_batch.kind = input.kind AND same_batch.key = input.key
LEFT JOIN LATERAL (
    SELECT j.id FROM "billing_jobs".jobs j
    WHERE input.key IS NOT NULL AND j.kind = input.kind AND j.key = input.key
      AND j.status IN ('pending', 'claimed')
    LIMIT 1
) existing ON true
ORDER BY input.ord;

-- job_next_visible_at: when the nearest not-yet-eligible job of these kinds becomes
-- claimable (NULL: none scheduled), so an idle worker wakes exactly then.
-- $1 text[] kinds: the worker's claim filter
-- index: jobs_next_visible_idx (pending rows by kind, visible_at), one probe per kind.
PREPARE billing_jobs_job_next_visible_at(text[]) AS
SELECT min(next.visible_at) AS next_visible_at
FROM unnest($1::text[]) AS k(kind)
CROSS JOIN LATERAL (
    SELECT visible_at FROM "billing_jobs".jobs
    WHERE status = 'pending' AND kind = k.kind AND visible_at > now()
    ORDER BY visible_at
    LIMIT 1
) next;

-- job_pause_if_owned: checkpoint the carry and return the job to pending; not a failure.
-- $1 text claimed_by: this worker's identity
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text carry: the new carry, msgspec-encoded JSON
-- $5 timestamptz at: visible again at (NULL: use $6)
-- $6 float8 after: visible again after seconds (NULL and $5 NULL: now)
-- index: primary key.
PREPARE billing_jobs_job_pause_if_owned(text, bigint, integer, text, timestamptz, float8) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'pending',
        carry = $4::jsonb,
        visible_at = coalesce($5, now() + make_interval(secs => coalesce($6, 0))),
        claim_expires_at = NULL
    WHERE j.id = $2 AND j.status = 'claimed' AND j.claimed_by = $1 AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at, j.visible_at
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, $1, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'paused', attempt, $1, 'visible again at ' || visible_at FROM settled
)
SELECT id FROM settled;

-- job_recover_stale: return expired claims to pending (or dead at the backstop). Run at
-- the start of every claim (inside job_claim) and by `venturi recover`.
-- $1 text recoverer: identity of whoever recovers, for the journal
-- $2 float8 backoff_base: seconds of the first backoff
-- $3 float8 backoff_factor: growth per failure
-- $4 float8 backoff_cap: longest backoff in seconds
-- index: jobs_stale_idx (claimed rows by claim_expires_at).
PREPARE billing_jobs_job_recover_stale(text, float8, float8, float8) AS
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
    SET status = CASE WHEN j.failures + 1 >= j.max_failures THEN 'dead' ELSE 'pending' END,
        failures = j.failures + 1,
        -- least() on the exponent too: power() overflows float8 long before 1000 failures.
        visible_at = now() + make_interval(
            secs => least($4, $2 * power($3, least(j.failures, 64)))),
        finished_at = CASE WHEN j.failures + 1 >= j.max_failures THEN now() END,
        claim_expires_at = NULL,
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
)
SELECT id, kind, status, attempt, claimed_by FROM recovered ORDER BY id;

-- job_release_if_owned: give a job back after a forced shutdown (ADR 21): pending and
-- visible now, journaled as released, not counted as a failure.
-- $1 text claimed_by: this worker's identity
-- $2 bigint id: the job
-- $3 integer attempt: the claim it was run under
-- $4 text detail: why it was released
-- index: primary key.
PREPARE billing_jobs_job_release_if_owned(text, bigint, integer, text) AS
WITH settled AS (
    UPDATE "billing_jobs".jobs j
    SET status = 'pending', visible_at = now(), claim_expires_at = NULL
    WHERE j.id = $2 AND j.status = 'claimed' AND j.claimed_by = $1 AND j.attempt = $3
    RETURNING j.id, j.attempt, j.claimed_at
),
journaled AS (
    INSERT INTO "billing_jobs".journal (job_id, at, event, attempt, worker, detail)
    SELECT id, claimed_at, 'claimed', attempt, $1, NULL FROM settled
    UNION ALL
    SELECT id, now(), 'released', attempt, $1, $4 FROM settled
)
SELECT id FROM settled;

-- journal_get: a job's written history, oldest first; the routine enqueued / claimed /
-- completed entries are read off the job row by the caller and merged in.
-- $1 bigint job_id: the job
-- index: journal_job_idx.
PREPARE billing_jobs_journal_get(bigint) AS
SELECT at, event, attempt, worker, detail
FROM "billing_jobs".journal
WHERE job_id = $1
ORDER BY at, id;

-- schema_lock: serialize concurrent `schema apply` runs on one database until commit.
PREPARE billing_jobs_schema_lock AS
SELECT pg_advisory_xact_lock(hashtext('venturi schema "billing_jobs"'));

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
