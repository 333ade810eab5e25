-- Lookup by part of a name (design §7): entity names and aliases are found by
-- their exact key, by a prefix of the key or of one of its words, and despite
-- a typo (trigram similarity). The trigram indexes serve both the LIKE
-- patterns of the prefixes and the similarity operators.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX entity_name_key_trgm_idx ON entity USING gin (name_key gin_trgm_ops);
CREATE INDEX entity_alias_key_trgm_idx ON entity_alias USING gin (alias_key gin_trgm_ops);
