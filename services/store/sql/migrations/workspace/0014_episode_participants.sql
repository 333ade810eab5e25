-- An episode's participants are written in the transaction that made it, by
-- its creator: checked as links and mentions are (0001), through a function
-- that sees the new episode whoever may read it. The check through the
-- episode's own visibility refused the participants of an episode made for
-- another member or for purposes its creator was not acting for, and the
-- call ended in an internal error.
CREATE FUNCTION episode_created_in_this_transaction(episode uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
    AS $$ SELECT EXISTS (SELECT 1 FROM episode e
                         WHERE e.id = episode AND e.created_by = caller_member()
                           AND e.xmin = pg_current_xact_id()::xid) $$;

DROP POLICY episode_participant_insert ON episode_participant;
CREATE POLICY episode_participant_insert ON episode_participant FOR INSERT
    WITH CHECK (episode_created_in_this_transaction(episode_id));
