import Dispatch

/// Runs every operation on a `JobStore` on one serial dispatch queue, off Swift's cooperative
/// thread pool (a busy database may block for its busy timeout, and the pool has only one
/// thread per core).
///
/// Guarantees: the store (and its connection) is only ever touched on `queue`, one operation at
/// a time, in the order they were handed in.
public final class StoreExecutor: Sendable {
    // @unchecked Sendable: the box is only opened inside blocks of the one serial `queue`, so
    // the non-Sendable store is never used from two threads at once.
    private final class Box: @unchecked Sendable {
        let store: any JobStore
        init(_ store: any JobStore) { self.store = store }
    }

    private let box: Box
    private let queue = HelperQueue.serial("haul.store")

    /// The store's `claimAheadRounds` and `claimBelowRounds`.
    public let claimAheadRounds: Int
    public let claimBelowRounds: Int

    public init(_ store: any JobStore) {
        box = Box(store)
        claimAheadRounds = store.claimAheadRounds
        claimBelowRounds = store.claimBelowRounds
    }

    /// Runs `body` on the store's queue and hands its result to `completion` there.
    public func async<T>(_ body: @escaping @Sendable (any JobStore) throws -> T,
                         completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        queue.async { [box] in
            completion(Result { try body(box.store) })
        }
    }

    public func perform<T: Sendable>(_ body: @escaping @Sendable (any JobStore) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { [box] in
                continuation.resume(with: Result { try body(box.store) })
            }
        }
    }
}
