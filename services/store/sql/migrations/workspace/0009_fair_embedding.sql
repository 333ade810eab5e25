-- Per-row failure isolation of the embedding job (design §6): a row the
-- embed service refuses is retried alone with backoff and, after the last
-- attempt, parked (next_attempt_at = 'infinity') with the reason kept here.
-- A text change (the sync trigger sets next_attempt_at = now()) or a rebuild
-- unparks it. The reason is the embed service's status, never memory text.
ALTER TABLE embedding_job ADD COLUMN last_error text;
CREATE INDEX embedding_job_parked_idx ON embedding_job (memory_id)
    WHERE next_attempt_at = 'infinity';
