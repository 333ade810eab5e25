-- What a write asked for, as a hash (never its text), beside its request id:
-- a retry must repeat its request exactly, and the same request id sent with
-- another request is refused instead of answered with the first one's memory
-- (docs/api.md, "Request ids"). NULL for keys written before this.
ALTER TABLE request_key ADD COLUMN fingerprint bytea;
