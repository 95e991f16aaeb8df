-- job_insert: enqueue one job, or return the unfinished job that already holds its key.
-- %(p1)s text kind: the task kind
-- %(p2)s text carry: msgspec-encoded JSON, validated by the caller
-- %(p3)s smallint priority: 0 HIGH, 1 NORMAL, 2 LOW
-- %(p4)s timestamptz at: visible from this instant (NULL: use %(p5)s)
-- %(p5)s float8 after: visible after this many seconds (NULL and %(p4)s NULL: now)
-- %(p6)s text key: de-duplication key (NULL: none)
-- %(p7)s integer max_failures: the task's failure backstop
-- %(p8)s float8 backoff_base: the task's declared Backoff, for recovery (NULL: none declared)
-- %(p9)s float8 backoff_factor: its growth per failure
-- %(p10)s float8 backoff_cap: its longest delay in seconds
-- %(p11)s boolean backoff_jitter: whether it is half-jittered
-- index: jobs_key_idx is the ON CONFLICT arbiter and finds the existing job.
WITH inserted AS (
    INSERT INTO "venturi".jobs (kind, carry, priority, visible_at, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter)
    VALUES (%(p1)s, %(p2)s::jsonb, %(p3)s::smallint,
            coalesce(%(p4)s::timestamptz, now() + make_interval(secs => coalesce(%(p5)s::float8, 0))),
            %(p6)s, %(p7)s::integer, %(p8)s::float8, %(p9)s::float8, %(p10)s::float8, %(p11)s::boolean)
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed')
    DO NOTHING
    RETURNING id
)
SELECT id FROM inserted
UNION ALL
-- Reached only on a key conflict. A conflicting row committed after this statement's
-- snapshot is invisible here; the caller then runs the statement again.
SELECT id FROM "venturi".jobs
WHERE %(p6)s::text IS NOT NULL AND kind = %(p1)s AND key = %(p6)s AND status IN ('pending', 'claimed')
LIMIT 1;

-- job_insert_many: enqueue many jobs in one statement; returns one id per input row, in
-- input order (an existing unfinished job's id where a key was already held). The id is
-- NULL where the key's holder committed after this statement's snapshot (it waited on
-- the holder's transaction): the caller runs the statement again for those rows, in the
-- same transaction, and the next snapshot sees the holder.
-- %(p1)s text[] kinds: the task kind of each row
-- %(p2)s text[] carries: msgspec-encoded JSON of each row
-- %(p3)s smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW
-- %(p4)s timestamptz[] ats: visible from (NULL: use afters)
-- %(p5)s float8[] afters: visible after seconds (NULL: now)
-- %(p6)s text[] keys: de-duplication keys (NULL: none)
-- %(p7)s integer[] max_failures: each task's failure backstop
-- %(p8)s float8[] backoff_bases: each task's declared Backoff, for recovery (NULL: none)
-- %(p9)s float8[] backoff_factors: its growth per failure
-- %(p10)s float8[] backoff_caps: its longest delay in seconds
-- %(p11)s boolean[] backoff_jitters: whether it is half-jittered
-- index: jobs_key_idx (arbiter and lookup of existing keys).
WITH input AS (
    -- Ids are drawn up front so that each input row can be matched to what was inserted.
    SELECT nextval(pg_get_serial_sequence('"venturi".jobs', 'id')) AS id, u.*
    FROM unnest(%(p1)s::text[], %(p2)s::text[], %(p3)s::smallint[], %(p4)s::timestamptz[], %(p5)s::float8[],
                %(p6)s::text[], %(p7)s::integer[], %(p8)s::float8[], %(p9)s::float8[], %(p10)s::float8[],
                %(p11)s::boolean[])
         WITH ORDINALITY AS u(kind, carry, priority, at, after, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter, ord)
),
inserted AS (
    INSERT INTO "venturi".jobs (id, kind, carry, priority, visible_at, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter)
    SELECT id, kind, carry::jsonb, priority,
           coalesce(at, now() + make_interval(secs => coalesce(after, 0))), key, max_failures,
           backoff_base, backoff_factor, backoff_cap, backoff_jitter
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
    SELECT j.id FROM "venturi".jobs j
    WHERE input.key IS NOT NULL AND j.kind = input.kind AND j.key = input.key
      AND j.status IN ('pending', 'claimed')
    LIMIT 1
) existing ON true
ORDER BY input.ord;

-- job_insert_many_unkeyed: enqueue many jobs that carry no de-duplication key, in one
-- statement; the fast path of enqueue_many (several times faster than job_insert_many,
-- which must match every row against existing keys).
-- Ids come back in ascending order, which is input order: rows are inserted in ordinality
-- order and each takes the next identity value as it is inserted.
-- %(p1)s text[] kinds: the task kind of each row
-- %(p2)s text[] carries: msgspec-encoded JSON of each row
-- %(p3)s smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW
-- %(p4)s timestamptz[] ats: visible from (NULL: use afters)
-- %(p5)s float8[] afters: visible after seconds (NULL: now)
-- %(p6)s integer[] max_failures: each task's failure backstop
-- %(p7)s float8[] backoff_bases: each task's declared Backoff, for recovery (NULL: none)
-- %(p8)s float8[] backoff_factors: its growth per failure
-- %(p9)s float8[] backoff_caps: its longest delay in seconds
-- %(p10)s boolean[] backoff_jitters: whether it is half-jittered
-- index: none read; the statement's notify trigger fires once for the whole batch.
INSERT INTO "venturi".jobs (kind, carry, priority, visible_at, max_failures,
                          backoff_base, backoff_factor, backoff_cap, backoff_jitter)
SELECT kind, carry::jsonb, priority,
       coalesce(at, now() + make_interval(secs => coalesce(after, 0))), max_failures,
       backoff_base, backoff_factor, backoff_cap, backoff_jitter
FROM unnest(%(p1)s::text[], %(p2)s::text[], %(p3)s::smallint[], %(p4)s::timestamptz[], %(p5)s::float8[],
            %(p6)s::integer[], %(p7)s::float8[], %(p8)s::float8[], %(p9)s::float8[], %(p10)s::boolean[])
     WITH ORDINALITY AS u(kind, carry, priority, at, after, max_failures,
                          backoff_base, backoff_factor, backoff_cap, backoff_jitter, ord)
ORDER BY ord
RETURNING id;

-- job_get: one job's row, with JSON columns as text for the caller's decoder.
-- %(p1)s bigint id: the job
-- index: primary key.
SELECT id, kind, status, priority, carry::text AS carry, key, attempt, failures,
       max_failures, created_at, visible_at, claimed_at, claimed_by, claim_expires_at,
       finished_at, result::text AS result, last_error, cancel_requested_at
FROM "venturi".jobs
WHERE id = %(p1)s;

-- journal_get: a job's written history, oldest first; the routine enqueued / claimed /
-- completed entries are read off the job row by the caller and merged in.
-- %(p1)s bigint job_id: the job
-- index: journal_job_idx.
SELECT at, event, attempt, worker, detail
FROM "venturi".journal
WHERE job_id = %(p1)s
ORDER BY at, id;

-- savepoint: open a savepoint inside the caller's transaction, for a statement group
-- that must be all or nothing (enqueue_many with keys) on a driver with no savepoint
-- API of its own (psycopg2).
-- index: none.
SAVEPOINT venturi_batch;

-- savepoint_release: the group succeeded; its writes stay in the caller's transaction.
-- index: none.
RELEASE SAVEPOINT venturi_batch;

-- savepoint_rollback: the group failed; undo its writes, keep the caller's transaction.
-- index: none.
ROLLBACK TO SAVEPOINT venturi_batch;
