-- Episodes (design §3.3): a dated span of one conversation or event, with its
-- own audience and purposes under the same eligibility as a memory; memories
-- may belong to one. Captured turns of one speaker share an episode until a
-- gap of more than two hours (services/store/episodes.py).

CREATE TABLE episode (
    id                  uuid PRIMARY KEY,
    title               text NOT NULL,
    started_at          timestamptz NOT NULL,
    ended_at            timestamptz NOT NULL CHECK (ended_at >= started_at),
    audience_member_id  uuid,
    purposes            purpose[] NOT NULL CHECK (cardinality(purposes) > 0),
    -- Set for the episodes capture opens: whose turns they gather.
    speaker_member_id   uuid,
    created_by          uuid NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX episode_speaker_idx ON episode (speaker_member_id, ended_at DESC)
    WHERE speaker_member_id IS NOT NULL;

-- Participants: members and entities.
CREATE TABLE episode_participant (
    episode_id  uuid NOT NULL REFERENCES episode (id),
    member_id   uuid,
    -- Forget removes an entity nothing mentions any more; its participation goes too.
    entity_id   uuid REFERENCES entity (id) ON DELETE CASCADE,
    CHECK ((member_id IS NULL) <> (entity_id IS NULL))
);
CREATE INDEX episode_participant_idx ON episode_participant (episode_id);

ALTER TABLE memory ADD COLUMN episode_id uuid REFERENCES episode (id);
CREATE INDEX memory_episode_idx ON memory (episode_id) WHERE episode_id IS NOT NULL;
-- The timeline of an entity reads claims by their stating memory and time.
CREATE INDEX attribute_claim_valid_idx ON attribute_claim (entity_id, valid_from);

ALTER TABLE episode ENABLE ROW LEVEL SECURITY;
ALTER TABLE episode FORCE ROW LEVEL SECURITY;
CREATE POLICY episode_eligible ON episode FOR SELECT
    USING (is_eligible(NULL, audience_member_id, purposes));
CREATE POLICY episode_insert ON episode FOR INSERT
    WITH CHECK (created_by = caller_member());
-- Capture extends the span of an episode its speaker may see.
CREATE POLICY episode_extend ON episode FOR UPDATE
    USING (is_eligible(NULL, audience_member_id, purposes))
    WITH CHECK (is_eligible(NULL, audience_member_id, purposes));

ALTER TABLE episode_participant ENABLE ROW LEVEL SECURITY;
ALTER TABLE episode_participant FORCE ROW LEVEL SECURITY;
CREATE POLICY episode_participant_visible ON episode_participant FOR SELECT
    USING (EXISTS (SELECT 1 FROM episode e WHERE e.id = episode_participant.episode_id));
CREATE POLICY episode_participant_insert ON episode_participant FOR INSERT
    WITH CHECK (EXISTS (SELECT 1 FROM episode e WHERE e.id = episode_participant.episode_id
                        AND e.xmin = pg_current_xact_id_if_assigned()::xid));

GRANT SELECT, INSERT ON episode, episode_participant TO recallatron_app;
GRANT UPDATE (ended_at) ON episode TO recallatron_app;
