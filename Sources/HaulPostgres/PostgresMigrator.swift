import HaulCore

/// Brings a PostgreSQL queue's schema up to date with a list of migrations (by default the
/// files of `Migrations/postgres/`, compiled in as `Migration.postgresEmbedded`).
///
/// Guarantees: one migrator at a time per database — it holds the session advisory lock
/// `advisoryLockKey` while it reads and applies, and releases it before returning, also on
/// error — so two processes starting at once apply each migration once; migrations run in
/// version order, each in its own transaction together with its row in `schema_migrations`
/// (on a new database, all of them in one), so a failure leaves the database at a whole
/// version. A database that records a version this binary does not know is refused
/// (`PostgresError` of kind `.unknownMigration`) and left untouched, and so is one whose schema
/// holds tables but no haul migration (another program's: `.notAQueue`). An upgrade refused for
/// want of rights (a worker's user with rights on the tables only) is `.upgradeNeedsOwner`, and
/// leaves the database at the last version applied. A migration's SQL must not hold its own
/// BEGIN or COMMIT; a setting it makes with SET LOCAL lasts to the end of its transaction, which
/// on a new database is the end of every migration.
public struct PostgresMigrator: Sendable {
    /// The `pg_advisory_lock` key migrations hold: "haulmigr" in ASCII.
    public static let advisoryLockKey: Int64 = 0x6861_756C_6D69_6772

    public let migrations: [Migration]

    public init(migrations: [Migration] = Migration.postgresEmbedded) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// The versions recorded in the database, in order (empty for a new database).
    public static func appliedVersions(_ connection: PostgresConnection) throws -> [(version: Int, name: String)] {
        let exists = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL")
        guard exists.first?.bool(0) == true else { return [] }
        return try connection.query("SELECT version, name FROM schema_migrations ORDER BY version").map {
            (version: $0.int(0), name: $0.string(1))
        }
    }

    /// Applies every pending migration. Waits while another migrator holds the lock.
    /// `create` false: a database without haul's schema is refused (`.noQueue`), not given one.
    public func migrate(_ connection: PostgresConnection, create: Bool = true) throws {
        try connection.run("SELECT pg_advisory_lock($1::bigint)", [.int(Int(Self.advisoryLockKey))])
        var unlocked = false
        defer {
            if !unlocked {
                _ = try? connection.run("SELECT pg_advisory_unlock($1::bigint)", [.int(Int(Self.advisoryLockKey))])
            }
        }
        let applied = try Self.appliedVersions(connection)
        let known = Set(migrations.map(\.version))
        if let unknown = applied.first(where: { !known.contains($0.version) }) {
            throw PostgresError(kind: .unknownMigration(version: unknown.version, name: unknown.name),
                                message: "schema migration \(unknown.version) (\(unknown.name)) is not known to this haul")
        }
        if applied.isEmpty, try connection.query("""
            SELECT count(*) > 0 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
            """).first?.bool(0) == true {
            throw PostgresError(kind: .notAQueue, message: "the database holds tables but no haul schema")
        }
        if applied.isEmpty && !create {
            throw PostgresError(kind: .noQueue, message: "the database holds no haul queue")
        }
        let done = Set(applied.map(\.version))
        let pending = migrations.filter { !done.contains($0.version) }
        let createTable = """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    int         PRIMARY KEY,
                name       text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        if pending.isEmpty {
            // Up to date.
        } else if applied.isEmpty {
            // A new database: every migration in one transaction, sent as one query. Each in its
            // own cost a commit (a flush of the server's log) and four round trips apiece: about
            // 3 ms of the ~50 ms a first `haul status` takes on a new database (medians of 10,
            // alternated); the rest is mostly creating the tables. An upgrade still applies one
            // migration a transaction, so no lock a migration takes on a queue in use is held
            // while the next one runs.
            let records = pending.map { "(\($0.version), '\($0.name.replacingOccurrences(of: "'", with: "''"))')" }
            do {
                try connection.transaction {
                    try connection.execute(([createTable] + pending.map(\.sql)
                                            + ["INSERT INTO schema_migrations (version, name) VALUES " + records.joined(separator: ", ")])
                                           .joined(separator: "\n;\n"))
                }
            } catch let error as PostgresError where error.sql != nil {
                // Named by their files: the SQL of them all would make a message of many kilobytes.
                throw PostgresError(kind: error.kind, sqlState: error.sqlState, message: error.message,
                                    sql: "the migrations of a new database, \(pending.map(\.name).joined(separator: ", "))")
            }
        } else {
            // schema_migrations exists: `applied` was read from it.
            for migration in pending {
                do {
                    try connection.transaction {
                        try connection.execute(migration.sql)
                        try connection.run("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                                           [.int(migration.version), .string(migration.name)])
                    }
                } catch let error as PostgresError where error.sqlState == "42501" {
                    // A worker's user with rights on the tables only (README): the owner upgrades.
                    throw PostgresError(kind: .upgradeNeedsOwner(name: migration.name), sqlState: error.sqlState,
                                        message: error.message, sql: error.sql)
                }
            }
        }
        unlocked = true
        try connection.run("SELECT pg_advisory_unlock($1::bigint)", [.int(Int(Self.advisoryLockKey))])
    }
}
