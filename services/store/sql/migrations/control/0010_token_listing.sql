-- ListTokens pages a listing's tokens by member, each member's oldest first,
-- continued by a keyset token (docs/api.md): this index answers each page
-- from where the last one ended, a member's tokens in order without sorting
-- all of them. It serves every lookup by member the one of 0005 served.
CREATE INDEX access_token_listing ON access_token (member_id, created_at, id);
DROP INDEX access_token_member;
