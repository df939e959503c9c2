-- partial_url: the URL (after redirects) that sent a partial file's bytes and its validator
-- (etag, last_modified), written with them (see the SQLite migration 0023). A nullable column
-- without a default: adding it rewrites no row.
ALTER TABLE jobs ADD COLUMN partial_url text;
