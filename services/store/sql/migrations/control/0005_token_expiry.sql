-- Token expiry, rotation and last use (design §3; issue 34). NULL expires_at:
-- the token never expires. `lifetime` is the policy a token was made with
-- (its expires_in), kept so that a rotation gives the new token the same one
-- however the old token's expiry was shortened since. last_used_at is written
-- at most once a minute per token, by the authentication that finds it older.
ALTER TABLE access_token
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN lifetime     interval CHECK (lifetime IS NULL OR lifetime > interval '0'),
    ADD COLUMN last_used_at timestamptz;

CREATE INDEX access_token_member ON access_token (member_id);
