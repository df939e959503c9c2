-- The kind of a job's last failure: its reason with what varies from job to job (paths, URLs,
-- digests, byte counts) taken out (see FailureKind), so failures can be grouped. last_error keeps
-- the reason whole.
ALTER TABLE jobs ADD COLUMN error_kind TEXT;
