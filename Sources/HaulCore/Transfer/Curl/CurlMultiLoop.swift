import CCurl
import Foundation
import Synchronization

/// One libcurl multi handle, driven by one dedicated thread (`curl_multi_poll`, `perform`,
/// `info_read`), as curl's own tool drives its parallel transfers. Other threads hand work in
/// through a locked inbox and wake the loop with `curl_multi_wakeup`; work handed in on the
/// loop's own thread (a transfer started, or a block enqueued, by a block or an `onEnd` running
/// there) goes to lists only that thread touches, with no lock and no wake-up, and is done
/// before the loop next sleeps.
///
/// As a `WorkQueue`, the loop runs blocks on its thread between turns, so a user whose work
/// runs there (the engine) starts the next transfer as soon as one ends, with no thread to wake;
/// as a `TimerWorkQueue` it keeps that user's one timer too, a deadline it never sleeps past.
///
/// Guarantees: every submitted transfer's `onEnd` is called exactly once (with a result,
/// `.cancelled` when cancelled or when the loop closes); a transfer's easy handle and context
/// stay alive while libcurl may call back into it; easy handles are reused, so the multi
/// handle's connection cache keeps connections alive; stall, drain and total deadlines are
/// checked on every turn, and the loop sleeps no longer than the nearest one.
///
/// `@unchecked Sendable`: `multi`, `running`, `idle`, `timer` and the `local` lists are touched
/// only on the loop's thread (after `init` hands them over by starting it; `onLoop` tells that
/// thread by its id, stored before any work can arrive); the inbox is under its mutex, and
/// `curl_multi_wakeup` — the one libcurl call made from other threads, which libcurl allows —
/// is made under that mutex while the inbox is open, so it never races the handle's clean-up.
final class CurlMultiLoop: TimerWorkQueue, @unchecked Sendable {
    private struct Inbox {
        var starts: [CurlEasyTransfer] = []
        var cancels: [CurlEasyTransfer] = []
        var blocks: [@Sendable () -> Void] = []
        var cancelAll = false
        var closed = false

        /// Nothing handed in since the loop last took the inbox (see `handIn`).
        var isEmpty: Bool { starts.isEmpty && cancels.isEmpty && blocks.isEmpty && !cancelAll }
    }

    /// Idle connections libcurl keeps open for reuse, at most.
    static let connectionCache = 256
    /// Idle easy handles kept for reuse beyond this many are cleaned up.
    private static let idleLimit = 64
    /// The longest sleep between turns, so a missed wake-up costs at most this.
    private static let longestSleepMilliseconds: Int32 = 1000

    private let inbox = Mutex(Inbox())
    private let multi: UnsafeMutableRawPointer
    private let options: CurlTransport.Options
    private var running: [ObjectIdentifier: CurlEasyTransfer] = [:]
    private var idle: [CurlEasy] = []
    /// Work handed in on the loop's thread.
    private var local = Inbox()
    /// The one timer (`TimerWorkQueue`): its deadline on `Monotonic`'s clock, and its block.
    private var timer: (deadline: UInt64, block: @Sendable () -> Void)?
    /// The loop thread's id (`pthread_self`), set before the thread starts.
    private let loopThread = Atomic<UInt>(0)
    private var onLoop: Bool { loopThread.load(ordering: .acquiring) == UInt(pthread_self()) }
    private let limits: CurlRateLimits?

    init?(options: CurlTransport.Options) {
        guard CurlGlobal.initialized, let multi = curl_multi_init() else { return nil }
        self.multi = multi
        self.options = options
        limits = CurlRateLimits(options.connection)
        // No per-host connection limit here: the engine alone enforces the per-host cap.
        haul_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0)
        // A fixed cache of idle connections. libcurl's default (four per handle added at the
        // moment) shrank whenever many transfers ended in one turn, before the next ones were
        // added, and closed connections the next requests needed: 282 connects for workload A's
        // 10,000 files at 16 at once, against 80 with this.
        haul_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, Self.connectionCache)
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            loopThread.store(UInt(pthread_self()), ordering: .releasing)
            started.signal()
            run()
        }
        thread.name = "haul.curl"
        thread.start()
        started.wait()  // so `onLoop` is right from the first call
    }

    /// Runs `block` on the loop's thread, between turns. Dropped once the loop is closed.
    func enqueue(_ block: @escaping @Sendable () -> Void) {
        handIn { $0.blocks.append(block) }
    }

    /// Sets the loop's one timer; on the loop's thread (where its user runs) it costs no system
    /// call: the loop sleeps no longer than the deadline and runs the block at its next turn after.
    func setTimer(afterMilliseconds milliseconds: Int, _ block: @escaping @Sendable () -> Void) {
        let deadline = Monotonic.now + UInt64(max(0, milliseconds)) * 1_000_000
        guard onLoop else { return enqueue { [self] in timer = (deadline, block) } }
        timer = (deadline, block)
    }

    func cancelTimer() {
        guard onLoop else { return enqueue { [self] in timer = nil } }
        timer = nil
    }

    /// Hands a transfer to the loop (its `onEnd` set). After `close`, it ends as cancelled.
    func submit(_ transfer: CurlEasyTransfer) {
        if !handIn({ $0.starts.append(transfer) }) { resume(transfer, FetchResult(head: nil, failure: .cancelled)) }
    }

    func cancel(_ transfer: CurlEasyTransfer) {
        transfer.cancelRequested.store(true, ordering: .releasing)
        handIn { $0.cancels.append(transfer) }
    }

    func cancelAll() {
        handIn { $0.cancelAll = true }
    }

    /// Adds work with `add`: on the loop's thread to its own lists (done before it next sleeps),
    /// from any other thread to the inbox. Only the work that makes the inbox non-empty wakes the
    /// loop: the loop takes the whole inbox under the mutex, so a wake-up made for the first item
    /// covers every later one until then. False when the loop is closed (nothing was added).
    @discardableResult
    private func handIn(_ add: (inout Inbox) -> Void) -> Bool {
        if onLoop {
            add(&local)
            return true
        }
        return inbox.withLock { inbox in
            guard !inbox.closed else { return false }
            let wake = inbox.isEmpty
            add(&inbox)
            if wake { curl_multi_wakeup(multi) }
            return true
        }
    }

    /// Ends the loop: transfers still running end as cancelled, then the handles are cleaned up.
    func close() {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.closed = true
            curl_multi_wakeup(multi)
        }
    }

    // MARK: The loop's thread

    private func run() {
        var stillRunning: Int32 = 0
        var unpaused = false
        while true {
            var work = inbox.withLock { inbox -> Inbox in
                let work = inbox
                inbox.starts = []
                inbox.cancels = []
                inbox.blocks = []
                inbox.cancelAll = false
                return work
            }
            for block in work.blocks { block() }
            // What those blocks (and the last turn's `onEnd`s) handed in, and what that brings.
            while !local.blocks.isEmpty {
                let blocks = local.blocks
                local.blocks = []
                for block in blocks { block() }
            }
            work.starts += local.starts
            work.cancels += local.cancels
            work.cancelAll = work.cancelAll || local.cancelAll
            local = Inbox()
            for transfer in work.starts { start(transfer) }
            for transfer in work.cancels { stop(transfer, .cancelled) }
            if work.cancelAll || work.closed {
                for transfer in Array(running.values) { stop(transfer, .cancelled) }
            }
            if work.closed { timer = nil; break }

            curl_multi_perform(multi, &stillRunning)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                      let context = CurlEasy.privatePointer(of: handle) else { continue }
                let code = haul_multi_message_result(message)
                let transfer = Unmanaged<CurlEasyTransfer>.fromOpaque(context).takeUnretainedValue()
                finish(transfer, code: code)
            }

            let now = Monotonic.now
            var nearest = UInt64.max
            var expired: [(CurlEasyTransfer, FetchFailure)] = []
            for transfer in running.values {  // unpausing never changes `running`; stopping does, after
                if let failure = transfer.expired(now: now) {
                    expired.append((transfer, failure))
                } else {
                    if transfer.unpauseIfDue(now: now) { unpaused = true }
                    nearest = min(nearest, transfer.nextDeadline)
                }
            }
            for (transfer, failure) in expired { stop(transfer, failure) }
            if let due = timer, due.deadline <= now {
                timer = nil  // before the block, which may set it again
                due.block()
            }
            if let timer { nearest = min(nearest, timer.deadline) }
            // An unpaused transfer has its kept piece taken; perform again before sleeping. Work
            // handed in on this thread (by `onEnd`s just now) is done before sleeping too.
            if unpaused || !local.blocks.isEmpty || !local.starts.isEmpty || !local.cancels.isEmpty || local.cancelAll {
                unpaused = false
                continue
            }
            let wait = nearest == .max ? Self.longestSleepMilliseconds
                : Int32(min(UInt64(Self.longestSleepMilliseconds), (nearest &- now) / 1_000_000 + 1))
            curl_multi_poll(multi, nil, 0, wait, nil)
        }
        // Starts handed in on this thread by the last `onEnd`s: they end too, as cancelled.
        while !local.starts.isEmpty {
            let starts = local.starts
            local.starts = []
            for transfer in starts { resume(transfer, FetchResult(head: nil, failure: .cancelled)) }
        }
        idle.removeAll()
        curl_multi_cleanup(multi)
    }

    private func start(_ transfer: CurlEasyTransfer) {
        if transfer.cancelRequested.load(ordering: .acquiring) {
            return resume(transfer, FetchResult(head: nil, failure: .cancelled))
        }
        guard let easy = idle.popLast() ?? CurlEasy() else {
            return resume(transfer, FetchResult(head: nil, failure: .transport("libcurl could not make a transfer handle")))
        }
        running[ObjectIdentifier(transfer)] = transfer
        transfer.limits = limits
        add(transfer, on: easy)
    }

    /// Configures the handle for the transfer's current URL and adds it to the multi handle.
    private func add(_ transfer: CurlEasyTransfer, on easy: CurlEasy) {
        easy.reset()
        transfer.configure(easy, options: options)
        let code = curl_multi_add_handle(multi, easy.raw)
        if code != CURLM_OK {
            running[ObjectIdentifier(transfer)] = nil
            recycle(transfer.detach())
            resume(transfer, FetchResult(head: nil, failure: .transport("libcurl could not start the transfer (\(String(cString: curl_multi_strerror(code))))")))
        }
    }

    /// A handle libcurl has finished with: the result, or the next redirect hop on the same handle.
    private func finish(_ transfer: CurlEasyTransfer, code: CURLcode, stopped: FetchFailure? = nil) {
        guard running[ObjectIdentifier(transfer)] === transfer, let easy = transfer.easy else { return }
        curl_multi_remove_handle(multi, easy.raw)
        switch transfer.complete(code, stopped: stopped) {
        case .redirect:
            add(transfer, on: easy)
        case .finished(let result):
            running[ObjectIdentifier(transfer)] = nil
            recycle(transfer.detach())
            resume(transfer, result)
        }
    }

    /// Stops a running transfer now, for `failure` (a transfer that already failed keeps its reason).
    private func stop(_ transfer: CurlEasyTransfer, _ failure: FetchFailure) {
        finish(transfer, code: CURLE_ABORTED_BY_CALLBACK, stopped: failure)
    }

    private func recycle(_ easy: CurlEasy?) {
        guard let easy, idle.count < Self.idleLimit else { return }
        idle.append(easy)
    }

    private func resume(_ transfer: CurlEasyTransfer, _ result: FetchResult) {
        let onEnd = transfer.onEnd
        transfer.onEnd = nil
        onEnd?(result)
    }
}
