-- The workspace schema as of workspace migration 0067, defined once
-- (manifest.txt names the versions it replaces). One workspace's memories,
-- their links and mentions, the memory graph, episodes, embeddings, the
-- embedding job's queue, idempotency keys, history evidence and the audit
-- trail. Eligibility (design §4) lives here once, as row-level security
-- policies (13_policies.sql).
--
-- The parts run in the order of their names, in one transaction: types,
-- tables, then each area's functions with their indexes and triggers, then
-- the policies and the grants.

-- Functions are defined by area, not in the order they call each other, and
-- their bodies read tables and functions of other parts: checked at creation,
-- a body naming what a later part defines would fail. Every body is checked
-- when it first runs instead (as pg_dump's scripts do); the policies, defaults
-- and generated columns, which Postgres always checks, come after what they
-- name.
SET LOCAL check_function_bodies = off;

CREATE EXTENSION IF NOT EXISTS vector;
-- For the lexical arm's GIN indexes, which hold a memory's audience (a uuid)
-- beside its lexemes (06_recall.sql).
CREATE EXTENSION IF NOT EXISTS btree_gin;
-- For lookup by part of a name (09_graph.sql).
CREATE EXTENSION IF NOT EXISTS pg_trgm;
-- For the audit log's indexes by time (04_memory.sql).
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TYPE memory_kind AS ENUM ('note', 'fact', 'decision', 'summary');
CREATE TYPE memory_origin AS ENUM ('told', 'derived', 'migrated');
CREATE TYPE purpose AS ENUM ('assist', 'automate', 'personalize', 'audit');
CREATE TYPE link_kind AS ENUM ('derived_from', 'about');

-- The audience key of the statistics and of the indexes by audience: the nil
-- uuid stands for the workspace. Here, before the tables whose generated
-- columns use it.
CREATE FUNCTION stat_audience(audience_member_id uuid) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT coalesce(audience_member_id, '00000000-0000-0000-0000-000000000000'::uuid) $$;
