-- The members removed from this workspace, as its own database knows them
-- (design §10). A write for one member checks the control plane first; the
-- removal may come between that check and the write's commit. So a write
-- for a member also holds that member's write lock (shared, for its
-- transaction) and reads this table; the removal takes the same lock alone
-- and adds the member here in the transaction that erases or hands over
-- their memories. A write either commits before that transaction (and is
-- erased or handed over with the rest) or is refused after it.
CREATE TABLE removed_member (
    member_id uuid PRIMARY KEY,
    removed_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON removed_member TO recallatron_app;
