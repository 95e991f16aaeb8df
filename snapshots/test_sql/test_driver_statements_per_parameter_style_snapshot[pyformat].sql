-- job_insert: enqueue one job, or find the job that holds its key: the unfinished one, or
-- (with unique_for) one that finished less than unique_for seconds ago. With replace, a
-- pending holder takes this enqueue's carry, priority and visible time; a claimed or
-- finished holder is left alone. Returns the id and the outcome: inserted, replaced,
-- pending or claimed (the unfinished holder, left as it was), finished (a recent one).
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
-- %(p12)s float8 unique_for: seconds a finished job still holds its key (NULL: none); kept
-- on the job, which retention keeps as long
-- %(p13)s boolean replace: a pending holder takes %(p2)s, %(p3)s and the visible time of %(p4)s/%(p5)s
-- %(p14)s text traceparent: W3C trace context of the enqueuing span (NULL: none)
-- %(p15)s text grp: the job's group (NULL: none; SPEC 13)
-- index: jobs_key_idx is the ON CONFLICT arbiter and finds the unfinished holder;
-- jobs_key_search_idx finds a recently finished one.
WITH recent AS (
    -- A finished job: in the history once the maintenance pass moved it.
    SELECT id FROM "venturi".all_jobs
    WHERE %(p12)s::float8 IS NOT NULL AND %(p6)s::text IS NOT NULL AND key = %(p6)s AND kind = %(p1)s
      AND finished_at > now() - make_interval(secs => %(p12)s::float8)
    ORDER BY finished_at DESC
    LIMIT 1
),
inserted AS (
    INSERT INTO "venturi".jobs (kind, carry, priority, visible_at, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              traceparent, grp, unique_for)
    SELECT %(p1)s, %(p2)s::jsonb, %(p3)s::smallint,
           coalesce(%(p4)s::timestamptz, now() + make_interval(secs => coalesce(%(p5)s::float8, 0))),
           %(p6)s, %(p7)s::integer, %(p8)s::float8, %(p9)s::float8, %(p10)s::float8, %(p11)s::boolean, %(p14)s::text, %(p15)s::text,
           -- Kept on a keyed job only: retention holds it for the window (job_purge_batch).
           CASE WHEN %(p6)s::text IS NOT NULL THEN %(p12)s::float8 END
    WHERE NOT EXISTS (SELECT 1 FROM recent)
    ON CONFLICT (kind, key) WHERE key IS NOT NULL AND status IN ('pending', 'claimed', 'waiting')
    DO NOTHING
    RETURNING id
),
-- Reached only on a key conflict. A conflicting row committed after this statement's
-- snapshot is invisible here; the caller then runs the statement again.
holder AS (
    SELECT id, status FROM "venturi".jobs
    WHERE %(p6)s::text IS NOT NULL AND kind = %(p1)s AND key = %(p6)s AND status IN ('pending', 'claimed', 'waiting')
    LIMIT 1
),
replaced AS (
    -- A claim that locked the holder first wins: this waits for it, then finds the row
    -- claimed and leaves it alone.
    UPDATE "venturi".jobs j
    SET carry = %(p2)s::jsonb, priority = %(p3)s::smallint,
        visible_at = coalesce(%(p4)s::timestamptz,
                              now() + make_interval(secs => coalesce(%(p5)s::float8, 0)))
    FROM holder
    WHERE %(p13)s::boolean AND j.id = holder.id AND j.status = 'pending'
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
-- key); replaced, pending or claimed (the key's unfinished holder, replaced when %(p13)s and
-- pending); finished (with unique_for, a job of the key finished within it). The id is
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
-- %(p12)s float8[] unique_fors: seconds a finished job still holds the row's key (NULL: none);
-- kept on the job, which retention keeps as long
-- %(p13)s boolean replace: a pending holder takes the row's carry, priority and visible time
-- (the caller sends each key once when it replaces)
-- %(p14)s text traceparent: W3C trace context of the enqueuing span, for every row (NULL: none)
-- %(p15)s text[] grps: each row's group (NULL: none; SPEC 13)
-- index: jobs_key_idx (arbiter and lookup of unfinished holders); jobs_key_search_idx
-- (recently finished holders).
WITH input AS (
    -- Ids are drawn up front so that each input row can be matched to what was inserted.
    SELECT nextval(pg_get_serial_sequence('"venturi".jobs', 'id')) AS id, u.*
    FROM unnest(%(p1)s::text[], %(p2)s::text[], %(p3)s::smallint[], %(p4)s::timestamptz[], %(p5)s::float8[],
                %(p6)s::text[], %(p7)s::integer[], %(p8)s::float8[], %(p9)s::float8[], %(p10)s::float8[],
                %(p11)s::boolean[], %(p12)s::float8[], %(p15)s::text[])
         WITH ORDINALITY AS u(kind, carry, priority, at, after, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              unique_for, grp, ord)
),
recent AS (
    SELECT DISTINCT ON (input.ord) input.ord, j.id
    FROM input
    -- A finished job: in the history once the maintenance pass moved it.
    JOIN "venturi".all_jobs j
      ON input.key IS NOT NULL AND input.unique_for IS NOT NULL
     AND j.key = input.key AND j.kind = input.kind
     AND j.finished_at > now() - make_interval(secs => input.unique_for)
    ORDER BY input.ord, j.finished_at DESC
),
inserted AS (
    INSERT INTO "venturi".jobs (id, kind, carry, priority, visible_at, key, max_failures,
                              backoff_base, backoff_factor, backoff_cap, backoff_jitter,
                              traceparent, grp, unique_for)
    SELECT id, kind, carry::jsonb, priority,
           coalesce(at, now() + make_interval(secs => coalesce(after, 0))), key, max_failures,
           backoff_base, backoff_factor, backoff_cap, backoff_jitter, %(p14)s::text, grp,
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
    JOIN "venturi".jobs j ON j.kind = input.kind AND j.key = input.key
    WHERE %(p13)s::boolean AND input.key IS NOT NULL AND j.status = 'pending'
      AND (SELECT count(*) FROM inserted) >= 0
    ORDER BY j.id
    FOR NO KEY UPDATE OF j
),
replaced AS (
    UPDATE "venturi".jobs j
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
    SELECT j.id, j.status FROM "venturi".jobs j
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
-- of a batch of one task) binds that value once, as %(p13)s-%(p15)s, and its array as NULL:
-- unnest pads a NULL array with NULLs, which the value fills.
-- %(p1)s text[] kinds: the task kind of each row (NULL: %(p13)s for every row)
-- %(p2)s text carries: one JSON array of every row's msgspec-encoded carry, in row order
-- %(p3)s smallint[] priorities: 0 HIGH, 1 NORMAL, 2 LOW (NULL: %(p14)s for every row)
-- %(p4)s timestamptz[] ats: visible from (NULL: use afters)
-- %(p5)s float8[] afters: visible after seconds (NULL: now)
-- %(p6)s integer[] max_failures: each task's failure backstop (NULL: %(p15)s for every row)
-- %(p7)s float8[] backoff_bases: each task's declared Backoff, for recovery (NULL: none)
-- %(p8)s float8[] backoff_factors: its growth per failure
-- %(p9)s float8[] backoff_caps: its longest delay in seconds
-- %(p10)s boolean[] backoff_jitters: whether it is half-jittered
-- %(p11)s text traceparent: W3C trace context of the enqueuing span, for every row (NULL: none)
-- %(p12)s text[] grps: each row's group (NULL: none; SPEC 13)
-- %(p13)s text kind: every row's kind when %(p1)s is NULL
-- %(p14)s smallint priority: every row's priority when %(p3)s is NULL
-- %(p15)s integer max_failures: every row's failure backstop when %(p6)s is NULL
-- index: none read; the statement's notify trigger fires once for the whole batch.
WITH inserted AS (
INSERT INTO "venturi".jobs (kind, carry, priority, visible_at, max_failures,
                          backoff_base, backoff_factor, backoff_cap, backoff_jitter, traceparent,
                          grp)
SELECT coalesce(kind, %(p13)s::text), carry, coalesce(priority, %(p14)s::smallint),
       coalesce(at, now() + make_interval(secs => coalesce(after, 0))),
       coalesce(max_failures, %(p15)s::integer),
       backoff_base, backoff_factor, backoff_cap, backoff_jitter, %(p11)s::text, grp
FROM ROWS FROM (unnest(%(p1)s::text[]), jsonb_array_elements(%(p2)s::jsonb), unnest(%(p3)s::smallint[]),
               unnest(%(p4)s::timestamptz[]), unnest(%(p5)s::float8[]), unnest(%(p6)s::integer[]),
               unnest(%(p7)s::float8[]), unnest(%(p8)s::float8[]), unnest(%(p9)s::float8[]),
               unnest(%(p10)s::boolean[]), unnest(%(p12)s::text[]))
     WITH ORDINALITY AS u(kind, carry, priority, at, after, max_failures,
                          backoff_base, backoff_factor, backoff_cap, backoff_jitter, grp, ord)
ORDER BY ord
RETURNING id
)
SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids FROM inserted;

-- job_get: one job's row, with JSON columns as text for the caller's decoder.
-- %(p1)s bigint id: the job
-- index: primary key.
SELECT id, kind, status, priority, carry::text AS carry, key, attempt, failures,
       max_failures, created_at, visible_at, claimed_at, claimed_by, claim_expires_at,
       finished_at, result::text AS result, last_error, cancel_requested_at, grp
FROM "venturi".all_jobs
WHERE id = %(p1)s;

-- job_get_with_journal: one job's row and its written journal in one statement, so both
-- come from one snapshot (two statements could see a settlement between them: a job
-- dead without its failure, or the reverse). One row per journal entry, oldest first,
-- each with the job's columns; a job without entries is one row whose entry columns are
-- NULL; no row: no such job. JSON columns as text for the caller's decoder.
-- %(p1)s bigint id: the job
-- index: primary key; journal_job_idx for the entries.
SELECT j.id, j.kind, j.status, j.priority, j.carry::text AS carry, j.key, j.attempt,
       j.failures, j.max_failures, j.created_at, j.visible_at, j.claimed_at, j.claimed_by,
       j.claim_expires_at, j.finished_at, j.result::text AS result, j.last_error,
       j.cancel_requested_at, j.grp,
       l.at AS entry_at, l.event AS entry_event, l.attempt AS entry_attempt,
       l.worker AS entry_worker, l.detail AS entry_detail
FROM "venturi".all_jobs j
LEFT JOIN "venturi".journal l ON l.job_id = j.id
WHERE j.id = %(p1)s
ORDER BY l.at, l.id;

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
