-- How many memories the caller may see wait for their vector (a row in the
-- embedding job's outbox, pending or parked): the dense arm cannot find
-- them, and recall says so (RecallOutcome.not_embedded). SECURITY DEFINER:
-- the app role may not read the outbox, whose rows name memories of every
-- audience; the eligibility rule (is_eligible, the memory's row security) is
-- applied explicitly, so only the caller's memories are counted. The count
-- stops at ``cap``: with the job far behind it reads about ``cap`` rows of
-- the outbox a recall, and with the job caught up (the outbox empty) none.
CREATE FUNCTION memories_not_embedded(cap integer) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
SELECT count(*)::integer FROM (
    SELECT 1
    FROM embedding_job j JOIN memory m ON m.id = j.memory_id
    WHERE m.invalidated_at IS NULL AND m.superseded_by_id IS NULL
      AND (m.audience_member_id IS NULL OR m.audience_member_id = caller_member())
      AND caller_purpose() = ANY (m.purposes)
    LIMIT cap
) waiting
$$;
REVOKE ALL ON FUNCTION memories_not_embedded(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memories_not_embedded(integer) TO recallatron_app;
