-- An owner's audit log filtered by member or by actions (ListAuditEvents,
-- services/store/domain/owner_view.py) had no index to serve it: each page
-- walked the log from its newest event for the rows that matched, so a
-- member's few old events among 20,000 of another's cost the 20,000 on every
-- page. These give a member's events, an action's, and a member's of one
-- action newest first (ascending -id: the log's order and its keyset), for
-- the statements that name them as plain equalities
-- (owner_queries.AUDIT_EVENTS_*); a list of actions is walked action by
-- action and merged. Keyed by -id rather than id so that only they give that
-- order: the primary key, which gives "id DESC", is no candidate for it
-- (owner_queries.BY_NEGATED_ID). The log has no row security: an owner reads
-- all of it.
CREATE INDEX audit_log_member_idx ON audit_log (member_id, (-id));
CREATE INDEX audit_log_action_idx ON audit_log (action, (-id));
CREATE INDEX audit_log_member_action_idx ON audit_log (member_id, action, (-id));
