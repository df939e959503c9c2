@testable import HaulCore
import Dispatch
import Glibc
import Synchronization
import XCTest

/// The engine's helpers run below libcurl's loop thread (which runs at the process's own
/// priority): on two cores the loop, haul's critical path, waited for a core behind them.
final class HelperQueueTests: XCTestCase {
    /// The calling thread's nice value (Linux: a thread's own).
    private static func nice() -> Int32 { getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) }

    /// Runs `body` through `submit` on another thread and returns the nice value seen there.
    private func niceInside(_ submit: (@escaping @Sendable () -> Void) -> Void) -> Int32 {
        let seen = Mutex<Int32?>(nil)
        let done = DispatchSemaphore(value: 0)
        submit {
            seen.withLock { $0 = Self.nice() }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        return seen.withLock { $0 } ?? .min
    }

    func testHelperQueuesRunBelowTheCallersPriority() {
        let own = Self.nice()
        XCTAssertGreaterThan(niceInside { HelperQueue.serial("test.serial").async(execute: $0) }, own)
        XCTAssertGreaterThan(niceInside { HelperQueue.concurrent("test.concurrent").async(execute: $0) }, own)
    }

    /// The store's exchanges, the helper that runs longest on workload A, run on one.
    func testTheStoreRunsOnAHelperQueue() throws {
        let (queue, directory) = try makeQueue()
        defer { _ = directory }
        let executor = StoreExecutor(queue)
        let own = Self.nice()
        let inside = niceInside { block in executor.async({ _ in block() }, completion: { _ in }) }
        XCTAssertGreaterThan(inside, own)
    }
}
