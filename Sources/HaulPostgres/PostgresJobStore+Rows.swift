import HaulCore

/// How the PostgreSQL queue binds values and reads jobs from its rows (SQL stays in this module).
extension PostgresJobStore {
    /// A value bound to a statement: nullable integers and texts, and arrays of them (for the
    /// statements that take a whole batch through `unnest`).
    enum Arg {
        case int(Int)
        case text(String)
        case null
        case bool(Bool)
        case ints([Int])
        case texts([String?])

        static func int(_ value: Int?) -> Arg { value.map(Arg.int) ?? .null }
        static func text(_ value: String?) -> Arg { value.map(Arg.text) ?? .null }
        /// Nullable integers as a text array: bind as `$n::text[]::bigint[]`.
        static func optionalInts(_ values: [Int?]) -> Arg { .texts(values.map { $0.map(String.init) }) }

        var value: PostgresValue {
            switch self {
            case .int(let value): return .int(value)
            case .text(let value): return .string(value)
            case .null: return .null
            case .bool(let value): return .bool(value)
            case .ints(let values): return .ints(values)
            case .texts(let values): return .strings(values)
            }
        }
    }

    func rows(_ sql: String, _ args: [Arg] = []) throws -> PostgresRows {
        try connection.query(sql, args.map(\.value))
    }

    func one(_ sql: String, _ args: [Arg] = []) throws -> PostgresRow {
        let result = try rows(sql, args)
        guard let row = result.first else { throw PostgresError(kind: .client, message: "no row returned", sql: sql) }
        return row
    }

    @discardableResult
    func run(_ sql: String, _ args: [Arg] = []) throws -> Int {
        try connection.run(sql, args.map(\.value))
    }

    /// Statements to send together, in order (see `PostgresConnection.pipeline`).
    struct Pipeline {
        fileprivate(set) var statements: [(sql: String, parameters: [PostgresValue])] = []

        /// Adds a statement; returns the index of its result.
        @discardableResult
        mutating func add(_ sql: String, _ args: [Arg] = []) -> Int {
            statements.append((sql, args.map(\.value)))
            return statements.count - 1
        }
    }

    /// Sends `pipeline` in one round trip (with the transaction's BEGIN when it is the first,
    /// and COMMIT after it when `commit`); one result per statement.
    func send(_ pipeline: Pipeline, commit: Bool = false) throws -> [PostgresResult] {
        try connection.pipeline(pipeline.statements, commit: commit)
    }

    /// The columns `job(_:)` reads, of the jobs row `t` and the hosts row `h`.
    static func jobColumns(_ t: String = "j", host: String = "h.host") -> String {
        ["id", "url", "#host", "destination", "state", "attempts", "max_attempts", "next_attempt_at", "lease_token",
         "lease_owner", "lease_expires_at", "last_status", "last_error", "error_kind", "expected_bytes", "received_bytes",
         "etag", "last_modified", "checksum", "created_at", "updated_at", "finished_at", "profile_id", "host_id",
         "if_exists", "kept", "placed_path", "placed_size", "placed_mtime", "placed_inode", "placed_ctime",
         "placed_etag", "placed_last_modified", "content_type", "final_url", "placed_sha256", "placed_by", "root_length",
         "partial_url"]
            .map { $0 == "#host" ? host : "\(t).\($0)" }.joined(separator: ", ")
    }

    /// How many columns `jobColumns` lists: a statement may read more after them, from this index.
    static let jobColumnCount = jobColumns().split(separator: ",").count

    static let selectJobs = "SELECT \(jobColumns()) FROM jobs j JOIN hosts h ON h.id = j.host_id"

    static func job(_ row: PostgresRow) -> Job {
        let placed = FileIdentity(storedSize: row.optionalInt(27), modified: row.optionalInt(28), inode: row.optionalInt(29),
                                  changed: row.optionalInt(30)).map {
            PlacedFile(path: row.optionalString(26), identity: $0,
                       metadata: ResponseMetadata(etag: row.optionalString(31), lastModified: row.optionalString(32),
                                                  contentType: row.optionalString(33), finalURL: row.optionalString(34),
                                                  sha256: row.optionalString(35)))
        }
        return Job(id: row.int(0), url: row.string(1), host: row.string(2), hostID: row.int(23), destination: row.string(3),
                   state: JobState(rawValue: row.string(4)) ?? .failed, attempts: row.int(5), maxAttempts: row.int(6),
                   nextAttemptAt: row.int(7), leaseToken: row.optionalString(8), leaseOwner: row.optionalString(9),
                   leaseExpiresAt: row.optionalInt(10), lastStatus: row.optionalInt(11), lastError: row.optionalString(12),
                   errorKind: row.optionalString(13), expectedBytes: row.optionalInt(14), receivedBytes: row.int(15),
                   etag: row.optionalString(16), lastModified: row.optionalString(17), checksum: row.optionalString(18),
                   createdAt: row.int(19), updatedAt: row.int(20), finishedAt: row.optionalInt(21), profileID: row.optionalInt(22),
                   ifExists: row.optionalString(24).flatMap(ExistingFilePolicy.init(rawValue:)) ?? .skip,
                   kept: row.bool(25), placed: placed, placedBy: row.optionalString(36),
                   root: Job.root(of: row.string(3), length: row.optionalInt(37)), partialURL: row.optionalString(38))
    }
}
