-- jobs.state's CHECK, written as a chain of equalities instead of an IN list. SQLite 3.40 codes
-- `CHECK (x IN (…))` of more than two values as a temporary b-tree built anew each time the check
-- runs, and it runs on every claim and every completion (they set jobs.state): measured under
-- callgrind, two such b-trees per downloaded file. The equalities cost a few comparisons.
-- Only the constraint's text changes and every row already meets it, so the table is not rebuilt:
-- the definition is edited in place, SQLite's documented way for such a change (lang_altertable,
-- "Making Other Kinds Of Table Schema Changes"). RESET turns schema editing off again and makes
-- this connection read the new definition; the migrator then bumps the schema version, so other
-- connections read it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
    'CHECK (state IN (''queued'', ''running'', ''done'', ''failed'', ''cancelled''))',
    'CHECK (state = ''queued'' OR state = ''running'' OR state = ''done'' OR state = ''failed'' OR state = ''cancelled'')')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
