import Foundation

/// Brings a database's schema up to date with a list of migrations.
///
/// Guarantees: migrations run in version order, each with its row in `schema_migrations`, all
/// those pending in one `BEGIN IMMEDIATE` transaction, so a crash leaves the database at the
/// version it had or at the newest, never between. A database that records a version this
/// binary does not know is refused and left untouched.
public struct Migrator: Sendable {
    public let migrations: [Migration]

    public init(migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// The versions recorded in the database, in order (empty for a new database).
    public static func appliedVersions(_ database: Database) throws -> [(version: Int, name: String)] {
        let exists = try database.scalarInt(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'")
        guard exists > 0 else { return [] }
        return try database.rows("SELECT version, name FROM schema_migrations ORDER BY version") {
            (version: $0.int(0), name: $0.string(1))
        }
    }

    /// Throws `DatabaseError.unknownMigration` when the database records a version not in
    /// `migrations`. Only reads, so it can run before anything is written.
    public func refuseUnknown(_ database: Database) throws {
        let known = Set(migrations.map(\.version))
        if let unknown = try Self.appliedVersions(database).first(where: { !known.contains($0.version) }) {
            throw DatabaseError.unknownMigration(path: database.path, version: unknown.version, name: unknown.name)
        }
    }

    /// Throws `DatabaseError.notAQueue` when the database has tables but records no migration
    /// (another program's database: haul adds no table to it), and `DatabaseError.missing` when
    /// it has no table at all and `mustBeQueue` (a command that does not add jobs found an empty
    /// file). Only reads.
    public static func refuseForeign(_ database: Database, mustBeQueue: Bool) throws {
        let tables = try database.rows("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'") {
            $0.string(0)
        }
        if tables.isEmpty {
            if mustBeQueue { throw DatabaseError.missing(path: database.path) }
        } else if !tables.contains("schema_migrations") {
            throw DatabaseError.notAQueue(path: database.path)
        }
    }

    public func migrate(_ database: Database) throws {
        try refuseUnknown(database)
        let applied = try Self.appliedVersions(database)
        let done = Set(applied.map(\.version))
        let pending = migrations.filter { !done.contains($0.version) }
        guard !pending.isEmpty else { return }
        // One transaction for them all: each migration in its own made SQLite read the whole
        // schema again after every one, two thirds of the instructions of a first `haul add`.
        try database.transaction(.write) {
            // Read again inside the write lock: another process may have migrated meanwhile.
            let done = Set(try Self.appliedVersions(database).map(\.version))
            let pending = pending.filter { !done.contains($0.version) }
            guard !pending.isEmpty else { return }
            try database.execute("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version    INTEGER PRIMARY KEY,
                    name       TEXT    NOT NULL,
                    applied_at INTEGER NOT NULL
                );
                """)
            for migration in pending {
                try database.execute(migration.sql)
                try database.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                                 migration.version, migration.name, Int(Date().timeIntervalSince1970 * 1000))
            }
            // A migration that edits a definition in sqlite_schema directly (0011) leaves the
            // schema version as it was, so connections already open would keep the old
            // definition: bump it once the migrations are in (those made of DDL statements have
            // bumped it already; once more costs nothing).
            let version = try database.scalarInt("PRAGMA schema_version")
            try database.execute("PRAGMA schema_version = \(version + 1)")
        }
    }
}
