// Skipping CHECK constraints for inserts that cannot break them.
extension Database {
    /// Runs `body` with the connection's CHECK constraints off (`PRAGMA ignore_check_constraints`),
    /// then turns them back on, whether `body` returns or throws.
    ///
    /// Only for statements whose values cannot break a CHECK constraint. SQLite 3.40 codes a
    /// `CHECK (x IN (…))` of more than two values as a temporary table built anew for every row
    /// it checks — in a bulk add of a million jobs, `jobs.state`'s check alone costs a fifth of the
    /// time. Switching the pragma makes prepared statements recompile on their next use, so call
    /// this around large batches, not single rows.
    func withoutCheckConstraints<T>(_ body: () throws -> T) throws -> T {
        try execute("PRAGMA ignore_check_constraints = ON")
        let result: T
        do {
            result = try body()
        } catch {
            try? execute("PRAGMA ignore_check_constraints = OFF")
            throw error
        }
        try execute("PRAGMA ignore_check_constraints = OFF")
        return result
    }
}
