-- root_length: how many bytes at the start of `destination` name the output folder the job was
-- added with (`-d`, absolute and standardised; every destination is that folder, "/", then the
-- rest), so that a run can check that no symbolic link below it leads outside, whatever the
-- link's age: a link that was already there when the folder was moved into place, or on another
-- machine's disk, was never seen when the job was added. A length, not the folder again: a few
-- bytes a row. NULL for jobs added before this migration: their runs keep the older check
-- (links newer than the job are refused). A nullable column without a default is added without
-- rewriting the table.
ALTER TABLE jobs ADD COLUMN root_length integer;
