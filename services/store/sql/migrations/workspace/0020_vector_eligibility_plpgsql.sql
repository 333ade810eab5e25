-- The vectors' eligibility rule (migration 0005) in PL/pgSQL, the rule itself
-- unchanged. The dense arm's HNSW walk applies the policy to every vector it
-- visits (about 180 a recall at 10,000 memories), and a SQL function that is
-- not inlined starts an executor for its one SELECT at each call: half of the
-- dense statement's time went there (docs/benchmarks.md, "The vectors'
-- eligibility, evaluated cheaply"). A PL/pgSQL body is evaluated as a simple
-- expression, and it stays as opaque to the planner as the SQL wrapper was,
-- so the planner still walks the index rather than sorting every vector.
CREATE OR REPLACE FUNCTION vector_is_eligible(audience_member_id uuid, purposes purpose[])
    RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = public
    AS $$
BEGIN
    RETURN (audience_member_id IS NULL OR audience_member_id = caller_member())
           AND caller_purpose() = ANY (purposes);
END $$;
