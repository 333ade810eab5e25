-- An owner's list of one author's memories (ListMemories with created_by,
-- services/store/domain/owner_view.py) had no index to serve it: it walked the
-- created_at index over the whole workspace for that author's rows, so one
-- author's few memories among thousands of another's cost the thousands. This
-- one gives an author's memories newest first (the listing's order and its
-- keyset), for the statement that names the author as a plain equality.
CREATE INDEX memory_author_idx ON memory (created_by, created_at DESC, id DESC);
