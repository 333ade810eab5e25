-- Eligibility (design §4), as row-level security policies: every table a
-- caller reads through the app role answers only the rows the caller may see
-- (is_eligible, 04_memory.sql), and takes only the rows the caller may write.
--
-- Row security row by row. The visible policies of mentions, revisions,
-- entities, aliases, claims and entity decisions ask whether a row's memory
-- (an entity: one of its mentions) is visible. As a plain EXISTS the planner
-- may answer it for a whole statement at once, hashing every memory the
-- caller may see, which it does whenever it expects many rows: an entity
-- mentioned by 20,000 of 30,000 memories cost a lookup of it every memory of
-- the workspace, its existence alone 30,000 rows, and each list of its card
-- as many again. An EXISTS with an OFFSET is never turned into a hash, so
-- each stays an index probe for the row at hand and a read that stops early
-- stops early; an entity's mentions are walked in their index's order
-- (mention_entity_time_idx) until one is visible, not scanned for.

CREATE POLICY memory_eligible ON memory FOR SELECT
    USING (is_eligible(invalidated_at, audience_member_id, purposes));

CREATE POLICY memory_insert ON memory FOR INSERT
    WITH CHECK (created_by = caller_member());

CREATE POLICY memory_update ON memory FOR UPDATE
    USING (is_eligible(invalidated_at, audience_member_id, purposes))
    WITH CHECK (is_eligible(invalidated_at, audience_member_id, purposes));

CREATE POLICY memory_link_visible ON memory_link FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = memory_link.memory_id));

CREATE POLICY memory_link_insert ON memory_link FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY mention_visible ON mention FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = mention.memory_id OFFSET 0));

CREATE POLICY mention_insert ON mention FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY request_key_own ON request_key
    USING (member_id = caller_member()) WITH CHECK (member_id = caller_member());

CREATE POLICY history_entry_owner ON history_entry FOR SELECT
    USING (owner_member_id = caller_member());

CREATE POLICY history_entry_insert ON history_entry FOR INSERT
    WITH CHECK (owner_member_id = caller_member());

CREATE POLICY history_term_stat_owner ON history_term_stat FOR SELECT
    USING (owner_member_id = caller_member());

CREATE POLICY history_corpus_stat_owner ON history_corpus_stat FOR SELECT
    USING (owner_member_id = caller_member());

CREATE POLICY dismissed_pair_visible ON dismissed_pair FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.first_id)
           AND EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.second_id));

CREATE POLICY dismissed_pair_insert ON dismissed_pair FOR INSERT
    WITH CHECK (dismissed_by = caller_member()
                AND EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.first_id)
                AND EXISTS (SELECT 1 FROM memory m WHERE m.id = dismissed_pair.second_id));

CREATE POLICY memory_embedding_visible ON memory_embedding FOR SELECT
    USING (vector_is_eligible(audience_member_id, purposes));

CREATE POLICY term_stat_visible ON term_stat FOR SELECT
    USING (purpose = caller_purpose() AND audience IN (stat_audience(NULL), caller_member()));

CREATE POLICY corpus_stat_visible ON corpus_stat FOR SELECT
    USING (purpose = caller_purpose() AND audience IN (stat_audience(NULL), caller_member()));

CREATE POLICY memory_revision_visible ON memory_revision FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = memory_revision.memory_id OFFSET 0));

CREATE POLICY memory_revision_insert ON memory_revision FOR INSERT
    WITH CHECK (changed_by = caller_member());

CREATE POLICY entity_visible ON entity FOR SELECT
    USING (xmin = pg_current_xact_id_if_assigned()::xid
           OR EXISTS (SELECT 1 FROM mention mn WHERE mn.entity_id = entity.id
                      ORDER BY mn.memory_created_at OFFSET 0));

CREATE POLICY entity_insert ON entity FOR INSERT WITH CHECK (true);

CREATE POLICY entity_alias_visible ON entity_alias FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = entity_alias.memory_id OFFSET 0));

CREATE POLICY entity_alias_insert ON entity_alias FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY entity_alias_retire ON entity_alias FOR UPDATE
    USING (created_in_this_transaction(memory_id))
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY attribute_claim_visible ON attribute_claim FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = attribute_claim.memory_id OFFSET 0));

CREATE POLICY attribute_claim_insert ON attribute_claim FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY attribute_claim_retire ON attribute_claim FOR UPDATE
    USING (created_in_this_transaction(memory_id))
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY relation_claim_visible ON relation_claim FOR SELECT
    USING (EXISTS (SELECT 1 FROM memory m WHERE m.id = relation_claim.memory_id OFFSET 0));

CREATE POLICY relation_claim_insert ON relation_claim FOR INSERT
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY relation_claim_retire ON relation_claim FOR UPDATE
    USING (created_in_this_transaction(memory_id))
    WITH CHECK (created_in_this_transaction(memory_id));

CREATE POLICY episode_eligible ON episode FOR SELECT
    USING (is_eligible(NULL, audience_member_id, purposes));

CREATE POLICY episode_insert ON episode FOR INSERT
    WITH CHECK (created_by = caller_member());

-- Capture extends the span of an episode its speaker may see.
CREATE POLICY episode_extend ON episode FOR UPDATE
    USING (is_eligible(NULL, audience_member_id, purposes))
    WITH CHECK (is_eligible(NULL, audience_member_id, purposes));

CREATE POLICY episode_participant_visible ON episode_participant FOR SELECT
    USING (EXISTS (SELECT 1 FROM episode e WHERE e.id = episode_participant.episode_id));

CREATE POLICY entity_merge_visible ON entity_merge FOR SELECT
    USING (EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.kept_id OFFSET 0)
           AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.merged_id OFFSET 0));

CREATE POLICY entity_merge_insert ON entity_merge FOR INSERT
    WITH CHECK (decided_by = caller_member()
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.kept_id)
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.merged_id));

CREATE POLICY entity_merge_undo ON entity_merge FOR UPDATE
    USING (EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.kept_id)
           AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_merge.merged_id))
    WITH CHECK (undone_by = caller_member());

CREATE POLICY entity_pair_apart_visible ON entity_pair_apart FOR SELECT
    USING (EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.first_id OFFSET 0)
           AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.second_id OFFSET 0));

CREATE POLICY entity_pair_apart_insert ON entity_pair_apart FOR INSERT
    WITH CHECK (decided_by = caller_member()
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.first_id)
                AND EXISTS (SELECT 1 FROM entity e WHERE e.id = entity_pair_apart.second_id));

CREATE POLICY episode_participant_insert ON episode_participant FOR INSERT
    WITH CHECK (episode_created_in_this_transaction(episode_id));
