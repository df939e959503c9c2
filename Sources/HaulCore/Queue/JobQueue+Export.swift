extension JobQueue {
    /// Calls `body` with every job whose id is above `after` (and that is in `state`, when
    /// given), in id order, and returns how many there were.
    ///
    /// Jobs are read `batch` at a time by keyset (`WHERE id > last ORDER BY id LIMIT batch`,
    /// never OFFSET), so each page costs the same at any depth of a queue of millions, and at
    /// most one page is in memory. `body` is called only once a page has been read and its
    /// statement reset: no read snapshot is held while `body` waits on a slow reader, so a
    /// `haul run` beside the export is never kept from checkpointing its journal. Each job is
    /// given at most once, as it stood when its page was read; jobs added meanwhile come at
    /// the end. An error thrown by `body` stops the walk and is rethrown.
    ///
    /// The walk reads each page of the table once, so it runs with a small page cache
    /// (`walkCacheKiB`) instead of the connection's 64 MiB, which would only fill with pages
    /// never read again (two thirds of the peak memory at a million jobs); the cache is set back
    /// after.
    @discardableResult
    public func forEachJob(state: JobState? = nil, after: Int = 0, batch: Int = 1_000, _ body: (Job) throws -> Void) throws -> Int {
        precondition(batch > 0, "forEachJob needs a batch of at least one job")
        let sql = state == nil
            ? "\(Job.select) WHERE j.id > ? ORDER BY j.id LIMIT ?"
            : "\(Job.select) WHERE j.id > ? AND j.state = ? ORDER BY j.id LIMIT ?"
        let cacheSize = try database.scalarInt("PRAGMA cache_size")
        try database.execute("PRAGMA cache_size = -\(Self.walkCacheKiB)")
        // A PRAGMA takes no bound parameter; the value spliced back is SQLite's own integer.
        defer { try? database.execute("PRAGMA cache_size = \(cacheSize)") }
        var last = after
        var count = 0
        while true {
            let values: [SQLiteBindable] = state.map { [last, $0.rawValue, batch] } ?? [last, batch]
            let page = try database.rows(sql, values, Job.init)
            for job in page { try body(job) }
            count += page.count
            guard page.count == batch, let final = page.last else { return count }
            last = final.id
        }
    }

    /// The page cache of a `forEachJob` walk, in KiB.
    static let walkCacheKiB = 2048
}
