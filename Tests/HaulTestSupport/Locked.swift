import Foundation

/// A value guarded by an `NSCondition`: mutations can wake threads that wait for a predicate over the value.
///
/// `@unchecked Sendable` is safe because `value` is private and is only ever read or written while
/// `condition` is locked (every accessor below takes the lock), and `Value` itself is `Sendable`, so
/// copies handed out of the lock may cross threads.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. Does not wake waiters.
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        condition.lock()
        defer { condition.unlock() }
        return try body(&value)
    }

    /// Runs `body` with exclusive access to the value, then wakes every waiter so it re-checks its predicate.
    func update<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return try body(&value)
    }

    /// Blocks until `predicate` holds for the value or `timeout` passes (`nil` = no limit).
    /// Returns whether the predicate held. Never sleeps blindly: it is woken by `update`.
    @discardableResult
    func wait(timeout: TimeInterval?, until predicate: (Value) -> Bool) -> Bool {
        let deadline = timeout.map { Date(timeIntervalSinceNow: $0) }
        condition.lock()
        defer { condition.unlock() }
        while !predicate(value) {
            if let deadline {
                if !condition.wait(until: deadline), !predicate(value) { return false }
            } else {
                condition.wait()
            }
        }
        return true
    }
}
