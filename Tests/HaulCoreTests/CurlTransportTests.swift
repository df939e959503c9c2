import Foundation
import HaulTestSupport
import Synchronization
import XCTest
@testable import HaulCore

/// What the libcurl transport promises beyond the contract every transport keeps (see
/// `DownloadAttemptEdgeTests`): flow control. URLSession on Linux has none, so this is not a
/// contract case.
final class CurlTransportTests: XCTestCase {
    /// A sink that holds its first body piece until released, as a disk that stops writing does.
    private final class StalledDisk: BodySink {
        private let release = DispatchSemaphore(value: 0)
        private let received = Atomic<Int>(0)
        private let stalled = DispatchSemaphore(value: 0)
        private let first = Atomic<Bool>(true)

        var bytes: Int { received.load(ordering: .relaxed) }

        func head(_ head: ResponseHead) -> HeadDisposition { .accept }

        func body(_ bytes: UnsafeRawBufferPointer) throws {
            if first.exchange(false, ordering: .relaxed) {
                stalled.signal()
                _ = release.wait(timeout: .now() + 30)
            }
            received.add(bytes.count, ordering: .relaxed)
        }

        /// Waits (on a thread of its own) until the first body piece is being held.
        func waitUntilStalled() async -> Bool {
            await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: self.stalled.wait(timeout: .now() + 10) == .success) }.start()
            }
        }

        func resume() { release.signal() }
    }

    /// This process's resident memory, in bytes.
    private static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }

    /// A body that arrives far faster than it can be written waits in the socket, not in memory:
    /// while the sink holds a write for a second and a half, an endless body from loopback (which
    /// would fill gigabytes in that time) adds almost nothing to this process's memory.
    func testASinkThatStopsWritingSlowsTheSocketNotMemory() async throws {
        let server = try FaultServer()
        defer { server.stop(timeout: 3) }
        server.route("/endless", FaultServer.Response.endless(pattern: Data(repeating: 0x5A, count: 64 * 1024)))
        let transport = try CurlTransport()
        let disk = StalledDisk()
        let request = FetchRequest(url: server.url("/endless"), stallTimeout: 30, totalTimeout: 4)
        let fetch = Task { await transport.fetch(request, into: disk) }

        let stalled = await disk.waitUntilStalled()
        XCTAssertTrue(stalled, "no body arrived")
        let before = Self.residentBytes()
        try await Task.sleep(for: .milliseconds(1500))
        let grown = Self.residentBytes() - before
        disk.resume()
        let result = await fetch.value

        XCTAssertLessThan(grown, 16 << 20, "memory grew by \(grown >> 20) MiB while the sink held one write")
        XCTAssertEqual(result.failure, .timedOut(4), "the endless body ends at the total timeout")
        XCTAssertGreaterThan(disk.bytes, 1 << 20, "the body flowed again once the sink wrote")
    }

    /// A sink that keeps nothing.
    private final class Discard: BodySink {
        func head(_ head: ResponseHead) -> HeadDisposition { .accept }
        func body(_ bytes: UnsafeRawBufferPointer) throws {}
    }

    /// Header lines as libcurl hands them over, read without a socket: names in any case, a
    /// repeated field joined, an obsolete folded line added to the field it continues, nothing
    /// kept of an interim (100) response. Only the headers haul reads are kept, and a folded line
    /// after one it does not read is dropped with it, not added to the field before.
    func testHeaderLinesKeepTheFieldsHaulReadsInAnyCaseRepeatedOrFolded() throws {
        final class HeadRecorder: BodySink, @unchecked Sendable {  // used on this thread only
            var heads: [ResponseHead] = []
            func head(_ head: ResponseHead) -> HeadDisposition {
                heads.append(head)
                return .accept
            }
            func body(_ bytes: UnsafeRawBufferPointer) throws {}
        }
        let sink = HeadRecorder()
        let transfer = CurlEasyTransfer(request: FetchRequest(url: URL(string: "http://127.0.0.1:1/f")!), sink: sink)
        let lines = ["HTTP/1.1 100 Continue\r\n", "ETag: \"interim\"\r\n", "\r\n",
                     "HTTP/1.1 200 OK\r\n", "ETAG:  \"v1\" \r\n", "Server: test\r\n", " folded into Server\r\n",
                     "content-TYPE: text/\r\n", "\t plain\r\n", "Retry-After: 5\r\n", "retry-after: 6\r\n",
                     "Content-Length:10\n", "X-Other: 1\r\n", "\r\n"]
        for line in lines {
            let accepted = Array(line.utf8).withUnsafeBytes { transfer.receiveHeader($0) }
            XCTAssertTrue(accepted, line)
        }
        let head = try XCTUnwrap(sink.heads.first)
        XCTAssertEqual(sink.heads.count, 1, "the interim response's head does not reach the sink")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head["etag"], "\"v1\"")
        XCTAssertEqual(head["Content-Type"], "text/ plain")
        XCTAssertEqual(head["retry-after"], "5, 6")
        XCTAssertEqual(head.contentLength, 10)
        XCTAssertEqual(head.headers, ["etag": "\"v1\"", "content-type": "text/ plain", "retry-after": "5, 6", "content-length": "10"],
                       "only the headers haul reads are kept")
    }

    /// The engine runs on the loop's thread (`workQueue`) and starts the next transfer from a
    /// transfer's end: that start must go through with no other thread's help, and blocks must
    /// keep their order and run one after another, never inside each other.
    func testWorkHandedInOnTheLoopsThreadRunsThereInOrderAndStartsTransfers() async throws {
        let server = try FaultServer()
        defer { server.stop(timeout: 3) }
        server.route("/a", FaultServer.Response.ok(Data("first".utf8)))
        server.route("/b", FaultServer.Response.ok(Data("second".utf8)))
        let transport = try CurlTransport()
        let queue = try XCTUnwrap(transport.workQueue, "libcurl's loop runs handed-in work")
        final class Recorder: Sendable {
            let entries = Mutex<(log: [String], threads: Set<UInt>)>(([], []))
            func note(_ entry: String) {
                entries.withLock {
                    $0.log.append(entry)
                    $0.threads.insert(UInt(pthread_self()))
                }
            }
        }
        let recorder = Recorder()
        let note = recorder.note
        let sink = Discard()
        let statusOfB: Int? = await withCheckedContinuation { continuation in
            queue.enqueue {
                note("block 1 begins")
                queue.enqueue { note("block 2") }
                queue.enqueue { note("block 3") }
                _ = transport.start(FetchRequest(url: server.url("/a")), into: sink) { first in
                    note("a ended \(first.head?.status ?? 0)")
                    let aEnded = DispatchTime.now()
                    // On the loop's thread, inside its turn: started here, woken by nobody.
                    _ = transport.start(FetchRequest(url: server.url("/b")), into: sink) { second in
                        note("b ended")
                        // The loop sleeps up to 1 s when it thinks it has nothing to do.
                        let seconds = Double(DispatchTime.now().uptimeNanoseconds - aEnded.uptimeNanoseconds) / 1e9
                        if seconds > 0.5 { note("b took \(seconds) s: the loop slept with a start in hand") }
                        continuation.resume(returning: second.head?.status)
                    }
                }
                note("block 1 ends")
            }
        }
        XCTAssertEqual(statusOfB, 200)
        let (log, threads) = recorder.entries.withLock { $0 }
        XCTAssertEqual(log, ["block 1 begins", "block 1 ends", "block 2", "block 3", "a ended 200", "b ended"])
        XCTAssertEqual(threads.count, 1, "every block and every end ran on the one loop thread")
    }

    /// Work handed in from other threads wakes the loop only when the inbox was empty (the
    /// first item's wake-up covers the rest): none of it may wait for the loop's longest sleep
    /// (1 s). Rounds of one block, then of many from four threads at once, each handed in while
    /// the loop sleeps, must all run well within it.
    func testWorkHandedInFromOtherThreadsNeverWaitsForTheLoopsLongestSleep() throws {
        let transport = try CurlTransport()
        let queue = try XCTUnwrap(transport.workQueue)
        for (round, perThread) in [1, 1, 250, 250, 1].enumerated() {
            let threads = perThread == 1 ? 1 : 4
            let total = threads * perThread
            let ran = Atomic<Int>(0)
            let allRan = DispatchSemaphore(value: 0)
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<perThread {
                    queue.enqueue {
                        if ran.add(1, ordering: .relaxed).newValue == total { allRan.signal() }
                    }
                }
            }
            XCTAssertEqual(allRan.wait(timeout: .now() + 0.5), .success,
                           "round \(round): \(ran.load(ordering: .relaxed)) of \(total) blocks ran within 0.5 s")
            // No event tells that the loop sleeps again: a pause long enough for it to.
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The loop keeps the engine's one timer (`TimerWorkQueue`), so a wake-up needs no other
    /// thread: the block runs on the loop's thread, no earlier than asked and well before the
    /// loop's longest sleep (1 s) even with nothing else to do; setting the timer again replaces
    /// the block not yet run, and a cancelled one never runs.
    func testTheLoopsTimerWakesItOnTimeOnItsThreadAndKeepsOnlyTheLastBlock() throws {
        let transport = try CurlTransport()
        let queue = try XCTUnwrap(transport.workQueue, "libcurl's loop keeps a timer")
        final class Recorder: Sendable {
            let fired = Mutex<[(name: String, thread: UInt, at: UInt64)]>([])
            let done = DispatchSemaphore(value: 0)
            func note(_ name: String) {
                fired.withLock { $0.append((name, UInt(pthread_self()), DispatchTime.now().uptimeNanoseconds)) }
                done.signal()
            }
        }
        let recorder = Recorder()
        let loopThread = Atomic<UInt>(0)
        let set = DispatchSemaphore(value: 0)
        let start = Atomic<UInt64>(0)
        queue.enqueue {
            loopThread.store(UInt(pthread_self()), ordering: .relaxed)
            start.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            queue.setTimer(afterMilliseconds: 300) { recorder.note("replaced") }
            queue.setTimer(afterMilliseconds: 60) { recorder.note("first") }
            set.signal()
        }
        XCTAssertEqual(set.wait(timeout: .now() + 2), .success)
        XCTAssertEqual(recorder.done.wait(timeout: .now() + 2), .success, "the timer never fired")
        queue.enqueue {
            queue.setTimer(afterMilliseconds: 40) { recorder.note("cancelled") }
            queue.cancelTimer()
            queue.setTimer(afterMilliseconds: 80) { recorder.note("second") }
        }
        XCTAssertEqual(recorder.done.wait(timeout: .now() + 2), .success, "the timer set after a cancel never fired")
        // Long enough for a replaced or cancelled block to have run, had it been kept.
        XCTAssertEqual(recorder.done.wait(timeout: .now() + 0.5), .timedOut, "a replaced or cancelled block ran")
        let fired = recorder.fired.withLock { $0 }
        XCTAssertEqual(fired.map(\.name), ["first", "second"])
        XCTAssertTrue(fired.allSatisfy { $0.thread == loopThread.load(ordering: .relaxed) }, "a timer block ran off the loop's thread")
        let seconds = Double(fired[0].at - start.load(ordering: .relaxed)) / 1e9
        XCTAssertGreaterThanOrEqual(seconds, 0.06, "the timer fired early")
        XCTAssertLessThan(seconds, 0.5, "the loop slept past its timer (it took \(seconds) s)")
    }
}
