-- A client's request id for CreateToken and RotateToken (docs/api.md, Tokens):
-- kept on the token the request made, so that a retry whose first answer was
-- lost makes no second live token. request_key is sha256 of "<who asked>:<request
-- id>" (an owner's member id, or the operator's), as a write's request key;
-- request_asked the hash of what was asked, so the same id with another
-- request is refused. The secret itself is still never kept.
ALTER TABLE access_token
    ADD COLUMN request_key   text,
    ADD COLUMN request_call  text CHECK (request_call IN ('create_token', 'rotate_token')),
    ADD COLUMN request_asked bytea,
    ADD CONSTRAINT access_token_request_whole
        CHECK ((request_key IS NULL) = (request_call IS NULL)
               AND (request_key IS NULL) = (request_asked IS NULL));

CREATE UNIQUE INDEX access_token_request ON access_token (request_key)
    WHERE request_key IS NOT NULL;
