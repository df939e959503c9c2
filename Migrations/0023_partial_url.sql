-- partial_url: the URL (after redirects) that sent a partial file's bytes and its validator
-- (etag, last_modified), written with them. A validator holds for its own resource only: a
-- resume that a redirect now takes to another URL starts over instead of splicing two files
-- whose validators happen to match. NULL (rows from before, or nothing recorded): not checked.
ALTER TABLE jobs ADD COLUMN partial_url TEXT;
