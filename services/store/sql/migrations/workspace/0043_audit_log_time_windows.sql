-- An owner's audit log filtered by time (ListAuditEvents with from/to,
-- services/store/domain/owner_view.py) still walked the log from its newest
-- event for the rows in the window: a window before all but the oldest of
-- 20,005 events cost the 20,004 on every page, with a member filter too.
--
-- The log's order and keyset is the id; the window is on `at`, which is set
-- at insert to now(), the start of the writing transaction. Ids mostly grow
-- with `at`, but not always: a long transaction's events take later ids with
-- an earlier time, and a clock may go back. So a window is not turned into id
-- bounds; these GiST indexes (btree_gist) hold each event as a point of its
-- id and time, after the member (and action) or the action it is asked by,
-- and are walked nearest first to the page token's id (owner_queries'
-- BY_DISTANCE), skipping index pages whose times all lie outside the window:
-- a page reads the events in the window and no others, whatever the times'
-- order.
--
-- Each index holds the id in its own spelling (id, -id, id::float8), and each
-- statement names one, so that only its index serves it: the planner, which
-- cannot tell them apart by cost, would walk the action index for the whole
-- log's window, every action's and member's part of it (some 20 times the
-- index pages of its own).
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE INDEX audit_log_time_idx ON audit_log USING gist (id, at);
CREATE INDEX audit_log_member_time_idx ON audit_log USING gist (member_id, action, (-id), at);
CREATE INDEX audit_log_action_time_idx ON audit_log USING gist (action, (id::float8), at);
