-- Token scopes (design §3): a token may be limited to some purposes and to the
-- read-only tools. NULL purposes: every purpose. The gateway enforces both.

ALTER TABLE access_token
    ADD COLUMN purposes text[] CHECK (
        purposes IS NULL
        OR (cardinality(purposes) > 0
            AND purposes <@ ARRAY['assist', 'automate', 'personalize', 'audit'])
    ),
    ADD COLUMN read_only boolean NOT NULL DEFAULT false;
