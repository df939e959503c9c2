import CCurl
import Foundation
import Synchronization

/// One libcurl multi handle, driven by one dedicated thread (`curl_multi_poll`, `perform`,
/// `info_read`), as curl's own tool drives its parallel transfers. Other threads hand work in
/// through a locked inbox and wake the loop with `curl_multi_wakeup`.
///
/// Guarantees: every submitted transfer's `onEnd` is called exactly once (with a result,
/// `.cancelled` when cancelled or when the loop closes); a transfer's easy handle and context
/// stay alive while libcurl may call back into it; easy handles are reused, so the multi
/// handle's connection cache keeps connections alive; stall, drain and total deadlines are
/// checked on every turn, and the loop sleeps no longer than the nearest one.
///
/// `@unchecked Sendable`: `multi`, `running` and `idle` are touched only on the loop's thread
/// (after `init` hands them over by starting it); the inbox is under its mutex, and
/// `curl_multi_wakeup` — the one libcurl call made from other threads, which libcurl allows —
/// is made under that mutex while the inbox is open, so it never races the handle's clean-up.
final class CurlMultiLoop: @unchecked Sendable {
    private struct Inbox {
        var starts: [CurlEasyTransfer] = []
        var cancels: [CurlEasyTransfer] = []
        var cancelAll = false
        var closed = false
    }

    /// Idle easy handles kept for reuse beyond this many are cleaned up.
    private static let idleLimit = 64
    /// The longest sleep between turns, so a missed wake-up costs at most this.
    private static let longestSleepMilliseconds: Int32 = 1000

    private let inbox = Mutex(Inbox())
    private let multi: UnsafeMutableRawPointer
    private let options: CurlTransport.Options
    private var running: [ObjectIdentifier: CurlEasyTransfer] = [:]
    private var idle: [CurlEasy] = []
    private let limits: CurlRateLimits?

    init?(options: CurlTransport.Options) {
        guard CurlGlobal.initialized, let multi = curl_multi_init() else { return nil }
        self.multi = multi
        self.options = options
        limits = CurlRateLimits(options.connection)
        // No per-host connection limit here: the engine alone enforces the per-host cap.
        haul_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0)
        let thread = Thread { [self] in run() }
        thread.name = "haul.curl"
        thread.start()
    }

    /// Hands a transfer to the loop (its `onEnd` set). After `close`, it ends as cancelled.
    func submit(_ transfer: CurlEasyTransfer) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.closed else { return false }
            inbox.starts.append(transfer)
            curl_multi_wakeup(multi)
            return true
        }
        if !accepted { resume(transfer, FetchResult(head: nil, failure: .cancelled)) }
    }

    func cancel(_ transfer: CurlEasyTransfer) {
        transfer.cancelRequested.store(true, ordering: .releasing)
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.cancels.append(transfer)
            curl_multi_wakeup(multi)
        }
    }

    func cancelAll() {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.cancelAll = true
            curl_multi_wakeup(multi)
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
            let work = inbox.withLock { inbox -> Inbox in
                let work = inbox
                inbox.starts = []
                inbox.cancels = []
                inbox.cancelAll = false
                return work
            }
            for transfer in work.starts { start(transfer) }
            for transfer in work.cancels { stop(transfer, .cancelled) }
            if work.cancelAll || work.closed {
                for transfer in Array(running.values) { stop(transfer, .cancelled) }
            }
            if work.closed { break }

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
            // An unpaused transfer has its kept piece taken; perform again before sleeping.
            if unpaused { unpaused = false; continue }
            let wait = nearest == .max ? Self.longestSleepMilliseconds
                : Int32(min(UInt64(Self.longestSleepMilliseconds), (nearest &- now) / 1_000_000 + 1))
            curl_multi_poll(multi, nil, 0, wait, nil)
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
