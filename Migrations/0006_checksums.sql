-- Checksums of every algorithm haul computes (md5, sha1, sha256, sha512), not only sha256: the
-- column sha256 becomes checksum and holds 'ALGORITHM=HEX', lower-case (e.g. 'md5=9e10…'), or
-- NULL when the user gave none. A job added before keeps its sha256, now as 'sha256=HEX', so it
-- is still checked.
-- A rename rather than a new column: no copy of the table, however long the queue. (The
-- column's comment in sqlite_schema is still 0001's; this file says what it holds.)

ALTER TABLE jobs RENAME COLUMN sha256 TO checksum;
UPDATE jobs SET checksum = 'sha256=' || checksum WHERE checksum IS NOT NULL;
