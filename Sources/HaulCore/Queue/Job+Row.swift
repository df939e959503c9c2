/// How the SQLite queue reads a `Job` from its rows (SQL stays in Queue).
extension Job {
    /// The SELECT that `init(row:)` reads; append a WHERE clause on `j` (jobs) or `h` (hosts).
    static let select = "SELECT \(columns(table: "j.", host: "h.host")) FROM jobs j JOIN hosts h ON h.id = j.host_id"

    /// The column list `init(row:)` reads, with `host` as the expression for the host's name
    /// (e.g. a parameter in a RETURNING clause, where no join is possible).
    static func columns(table: String = "", host: String) -> String {
        let t = table
        return "\(t)id, \(t)url, \(host), \(t)destination, \(t)state, \(t)attempts, \(t)max_attempts, \(t)next_attempt_at, "
            + "\(t)lease_token, \(t)lease_owner, \(t)lease_expires_at, \(t)last_status, \(t)last_error, \(t)expected_bytes, "
            + "\(t)received_bytes, \(t)etag, \(t)last_modified, \(t)checksum, \(t)created_at, \(t)updated_at, \(t)finished_at, \(t)profile_id, \(t)host_id, "
            + "\(t)if_exists, \(t)kept, \(t)placed_path, \(t)placed_size, \(t)placed_mtime, \(t)placed_inode, \(t)placed_ctime, "
            + "\(t)placed_etag, \(t)placed_last_modified, \(t)content_type, \(t)final_url, \(t)placed_sha256, \(t)error_kind, \(t)placed_by, "
            + "\(t)root_length, \(t)partial_url"
    }

    /// How many columns `columns` lists: a statement may read more after them, from this index.
    static let columnCount = columns(host: "h").split(separator: ",").count

    init(row: Row) {
        id = row.int(0)
        url = row.string(1)
        host = row.string(2)
        destination = row.string(3)
        state = JobState(rawValue: row.string(4)) ?? .failed
        attempts = row.int(5)
        maxAttempts = row.int(6)
        nextAttemptAt = row.int(7)
        leaseToken = row.optionalString(8)
        leaseOwner = row.optionalString(9)
        leaseExpiresAt = row.optionalInt(10)
        lastStatus = row.optionalInt(11)
        lastError = row.optionalString(12)
        expectedBytes = row.optionalInt(13)
        receivedBytes = row.int(14)
        etag = row.optionalString(15)
        lastModified = row.optionalString(16)
        checksum = row.optionalString(17)
        createdAt = row.int(18)
        updatedAt = row.int(19)
        finishedAt = row.optionalInt(20)
        profileID = row.optionalInt(21)
        hostID = row.int(22)
        errorKind = row.optionalString(35)
        ifExists = row.optionalString(23).flatMap(ExistingFilePolicy.init(rawValue:)) ?? .skip
        kept = row.int(24) != 0
        placedBy = row.optionalString(36)
        root = Job.root(of: destination, length: row.optionalInt(37))
        partialURL = row.optionalString(38)
        placed = FileIdentity(storedSize: row.optionalInt(26), modified: row.optionalInt(27), inode: row.optionalInt(28),
                              changed: row.optionalInt(29)).map {
            PlacedFile(path: row.optionalString(25), identity: $0,
                       metadata: ResponseMetadata(etag: row.optionalString(30), lastModified: row.optionalString(31),
                                                  contentType: row.optionalString(32), finalURL: row.optionalString(33),
                                                  sha256: row.optionalString(34)))
        }
    }
}
