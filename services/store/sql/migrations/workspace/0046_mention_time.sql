-- When a memory began to mention an entity, where that is later than the
-- memory itself: a correction's claims may name an entity, new or not, in an
-- older memory. `lookup` and `neighbors` as of a time before it do not count
-- that mention (the entity was not known through it then). NULL: since the
-- memory was written (every mention before this migration, those the old
-- store's migration brings, and those of an archive that carries no time).
-- A nullable column without a default: no rewrite of the table.
ALTER TABLE mention ADD COLUMN mentioned_at timestamptz;
