-- Forget, completely (design §8.6): a client's request id is kept
-- only as a hash, sha256 of "<member id>:<request id>" in hex, as
-- services/store/erasure.py computes it for every new write. The rows made
-- before are rewritten the same way, so a retry of an old write still finds
-- its first result. The plain ids they held stay in dead tuples and the WAL
-- until `recallatron scrub` (docs/reliability.md).

UPDATE request_key
SET request_id = encode(sha256(convert_to(member_id::text || ':' || request_id, 'UTF8')), 'hex');

UPDATE audit_log
SET request_id = encode(sha256(convert_to(member_id::text || ':' || request_id, 'UTF8')), 'hex')
WHERE request_id IS NOT NULL AND request_id <> '';

COMMENT ON COLUMN request_key.request_id IS
    'sha256 hex of "<member id>:<client request id>" (services/store/erasure.py)';
COMMENT ON COLUMN audit_log.request_id IS
    'sha256 hex of "<member id>:<client request id>" (services/store/erasure.py)';
