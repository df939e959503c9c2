import Dispatch

/// Runs every database operation of a download run on one serial dispatch queue, off Swift's
/// cooperative thread pool (a busy database may block for its busy timeout, and the pool has
/// only one thread per core).
///
/// Guarantees: the `JobQueue` (and its connection) is only ever touched on `queue`, one
/// operation at a time.
public final class QueueService: Sendable {
    // @unchecked Sendable: the box is only opened inside `queue.async` blocks of the one serial
    // `queue`, so the non-Sendable JobQueue is never used from two threads at once.
    private final class Box: @unchecked Sendable {
        let jobQueue: JobQueue
        init(_ jobQueue: JobQueue) { self.jobQueue = jobQueue }
    }

    private let box: Box
    private let queue = DispatchQueue(label: "haul.queue-service")

    public init(_ jobQueue: JobQueue) {
        box = Box(jobQueue)
    }

    /// Queues `body` without waiting for it. Operations run in the order they were queued, so a
    /// later `perform` sees this one's effect. Errors go to `onError`.
    public func enqueue(_ body: @escaping @Sendable (JobQueue) throws -> Void, onError: @escaping @Sendable (any Error) -> Void = { _ in }) {
        queue.async { [box] in
            do { try body(box.jobQueue) } catch { onError(error) }
        }
    }

    public func perform<T: Sendable>(_ body: @escaping @Sendable (JobQueue) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { [box] in
                continuation.resume(with: Result { try body(box.jobQueue) })
            }
        }
    }
}
