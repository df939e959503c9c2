import Foundation
import HaulCore
import Synchronization

/// Shows a run to a person or a script: a live display on a terminal (`ProgressView` in a
/// `LiveBlock`), plain lines when not,
/// JSON lines with --json, and always a final summary. URLs are shown redacted.
/// Called from several threads; output is serialised by a lock.
final class RunReporter: Sendable {
    enum Mode: Sendable { case terminal, plain, json, quiet }

    let mode: Mode
    private struct State {
        var block = LiveBlock()
        var view = ProgressView()
        /// Set when a reader went away (EPIPE): nothing more is written.
        var readerGone = false
        var onReaderGone: (@Sendable () -> Void)?
        var interrupted = false
    }
    private let state = Mutex(State())

    /// In terminal mode, whether each job's plain line goes to stdout too: stdout is a file or a
    /// pipe (`haul run > log.txt` while the live display is on the terminal).
    let linesToStdout: Bool

    init(mode: Mode, linesToStdout: Bool = false) {
        self.mode = mode
        self.linesToStdout = linesToStdout && mode == .terminal
    }

    /// Called once, on another thread, when stdout's or stderr's reader goes away (`haul run
    /// --json | head -1`): the run should stop cleanly, handing its jobs back.
    func whenReaderGone(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.onReaderGone = handler }
    }

    /// True once a reader went away; the run then ends by SIGPIPE, as Unix tools do.
    var readerWasGone: Bool { state.withLock { $0.readerGone } }

    func report(_ event: EngineEvent) {
        switch mode {
        case .quiet: return
        case .json: emitJSON(event)
        case .plain: if let line = Self.line(for: event, verbose: true) { write(line + "\n", to: STDOUT_FILENO) }
        case .terminal:
            if let line = Self.line(for: event, verbose: false) { aboveStatusLine(line) }
            if linesToStdout, let line = Self.line(for: event, verbose: true) { write(line + "\n", to: STDOUT_FILENO) }
        }
    }

    static func line(for event: EngineEvent, verbose: Bool) -> String? {
        switch event {
        case .started: return nil
        case .finished(let id, let url, let destination, let bytes):
            return verbose ? "done    #\(id) \(HTTPURL.redact(url)) → \(destination) (\(bytes) bytes)" : nil
        case .unchanged(let id, let url, let destination):
            return verbose ? "current #\(id) \(HTTPURL.redact(url)): \(destination) is up to date (HTTP 304)" : nil
        case .kept(let id, let url, let destination, _):
            return verbose ? "kept    #\(id) \(HTTPURL.redact(url)): \(destination) was already there; kept it, not downloaded (--if-exists replace or rename to fetch)" : nil
        case .retryScheduled(let id, let url, let attempt, let delay, let reason):
            return verbose ? "retry   #\(id) \(HTTPURL.redact(url)) in \(String(format: "%.1f", delay)) s after attempt \(attempt): \(HTTPURL.redact(reason))" : nil
        case .failed(let id, let url, let reason):
            return "failed  #\(id) \(HTTPURL.redact(url)): \(HTTPURL.redact(reason))"
        case .hostPaused(let host, let seconds, let reason):
            return "paused  \(host) for \(String(format: "%.0f", seconds)) s (\(HTTPURL.redact(reason)))"
        case .warning(let text):
            return "warning \(HTTPURL.redact(text))"
        }
    }

    private func emitJSON(_ event: EngineEvent) {
        let object: JSON
        switch event {
        case .started(let id, let url, let from):
            object = .object([("event", .string("started")), ("id", .int(id)), ("url", .string(HTTPURL.redact(url))), ("resume_from", .int(Int(from)))])
        case .finished(let id, let url, let destination, let bytes):
            object = .object([("event", .string("done")), ("id", .int(id)), ("url", .string(HTTPURL.redact(url))),
                              ("destination", .string(destination)), ("bytes", .int(Int(bytes)))])
        case .unchanged(let id, let url, let destination):
            object = .object([("event", .string("unchanged")), ("id", .int(id)), ("url", .string(HTTPURL.redact(url))),
                              ("destination", .string(destination))])
        case .kept(let id, let url, let destination, let bytes):
            object = .object([("event", .string("kept")), ("id", .int(id)), ("url", .string(HTTPURL.redact(url))),
                              ("destination", .string(destination)), ("bytes", .int(Int(bytes)))])
        case .retryScheduled(let id, let url, let attempt, let delay, let reason):
            object = .object([("event", .string("retry")), ("id", .int(id)), ("url", .string(HTTPURL.redact(url))),
                              ("attempt", .int(attempt)), ("delay_ms", .int(Int(delay * 1000))), ("reason", .string(HTTPURL.redact(reason)))])
        case .failed(let id, let url, let reason):
            object = .object([("event", .string("failed")), ("id", .int(id)), ("url", .string(HTTPURL.redact(url))), ("reason", .string(HTTPURL.redact(reason)))])
        case .hostPaused(let host, let seconds, let reason):
            object = .object([("event", .string("host_paused")), ("host", .string(host)), ("seconds", .int(Int(seconds))), ("reason", .string(HTTPURL.redact(reason)))])
        case .warning(let text):
            object = .object([("event", .string("warning")), ("message", .string(HTTPURL.redact(text)))])
        }
        write(object.text + "\n", to: STDOUT_FILENO)
    }

    /// A line for stderr that is not an engine event (an input line `haul get` rejected while
    /// it downloads), in every mode: above the live display on a terminal.
    func note(_ text: String) {
        if mode == .terminal { aboveStatusLine(text) } else { write(text + "\n", to: STDERR_FILENO) }
    }

    /// What `haul get`'s import queued, once it ended: a `queued` event with --json (scripts
    /// count rejected lines there; their reasons go to stderr), a note otherwise (none with
    /// --quiet).
    func imported(added: Int, alreadyQueued: Int, rejected: Int) {
        switch mode {
        case .quiet: return
        case .json:
            write(JSON.object([("event", .string("queued")), ("added", .int(added)), ("already_queued", .int(alreadyQueued)),
                               ("rejected", .int(rejected))]).text + "\n", to: STDOUT_FILENO)
        case .terminal, .plain:
            note("queued: added \(added), already queued \(alreadyQueued), rejected \(rejected)")
        }
    }

    /// True once `interrupted(signal:)` was called.
    var wasInterrupted: Bool { state.withLock { $0.interrupted } }

    func interrupted(signal: Int32) {
        state.withLock { $0.interrupted = true }
        let text = "haul: \(signal == SIGINT ? "interrupted" : "terminated"); handing running jobs back to the queue (again to quit at once)"
        if mode != .json { note(text) }
    }

    /// Redraws the live display (terminal mode only): it fits the terminal's width, asked anew
    /// each time, so it follows a resize at the next redraw.
    func showProgress(_ stats: EngineStats, at time: Double = Date().timeIntervalSince1970) {
        guard mode == .terminal else { return }
        let size = Terminal.size(of: STDERR_FILENO)
        state.withLock { state in
            let lines = state.view.lines(stats, at: time, size: size)
            let text = state.block.draw(lines, columns: size.columns)
            Self.writeRaw(text, to: STDERR_FILENO, &state)
        }
    }

    func finish(_ summary: RunSummary) {
        clearStatusLine()
        if mode == .json {
            write(JSON.object([
                ("event", .string("summary")),
                ("done", .int(summary.done)), ("kept", .int(summary.kept)), ("unchanged", .int(summary.unchanged)), ("failed", .int(summary.failed)), ("retries", .int(summary.retriesScheduled)),
                ("bytes", .int(Int(summary.bytes))), ("elapsed_ms", .int(Int(summary.elapsed * 1000))),
                ("interrupted", .bool(summary.interrupted)),
                ("failed_earlier", .int(summary.failedEarlier)),
                ("local_fault", .optional(summary.localFault)),
                ("average_transfers", .number(summary.averageTransfers)),
                ("counts", .object(JobState.allCases.map { ($0.rawValue, .int(summary.finalCounts[$0] ?? 0)) })),
                ("failures", .array(summary.failuresByReason.map { .object([("reason", .string(HTTPURL.redact($0.reason))), ("count", .int($0.count))]) })),
            ]).text + "\n", to: STDOUT_FILENO)
            return
        }
        let rate = summary.elapsed > 0 ? Double(summary.bytes) / summary.elapsed : 0
        let notes = [summary.kept > 0 ? "\(summary.kept) kept: already there" : nil,
                     summary.unchanged > 0 ? "\(summary.unchanged) up to date" : nil].compactMap { $0 }
        let kept = notes.isEmpty ? "" : " (" + notes.joined(separator: ", ") + ")"
        var text = "\(summary.interrupted || summary.localFault != nil ? "stopped" : "finished"): \(summary.done) done\(kept), \(summary.failed) failed, \(summary.retriesScheduled) retries; "
        text += "\(Format.bytes(Int(summary.bytes))) in \(Format.duration(summary.elapsed)) (\(Format.bytes(Int(rate)))/s)\n"
        let counts = JobState.allCases.map { "\($0.rawValue) \(summary.finalCounts[$0] ?? 0)" }.joined(separator: ", ")
        text += "queue: \(counts)\n"
        for failure in summary.failuresByReason.prefix(10) {
            text += "  \(failure.count) × \(HTTPURL.redact(failure.reason))\n"
        }
        if summary.failedEarlier > 0 {
            let jobs = summary.failedEarlier == 1 ? "1 job" : "\(summary.failedEarlier) jobs"
            text += "note: \(jobs) in the queue failed, not in this run (`haul list --state failed` lists them, `haul retry --failed` queues them again)\n"
        }
        write(text, to: STDOUT_FILENO)
    }

    private func aboveStatusLine(_ text: String) {
        let columns = Terminal.size(of: STDERR_FILENO).columns
        state.withLock { state in
            let output = state.block.print(Terminal.printable(text), columns: columns)
            Self.writeRaw(output, to: STDERR_FILENO, &state)
        }
    }

    private func clearStatusLine() {
        let columns = Terminal.size(of: STDERR_FILENO).columns
        state.withLock { state in
            let output = state.block.erase(columns: columns)
            if !output.isEmpty { Self.writeRaw(output, to: STDERR_FILENO, &state) }
        }
    }

    private func write(_ text: String, to descriptor: Int32) {
        state.withLock { Self.writeRaw(text, to: descriptor, &$0) }
    }

    /// Writes unless a reader has gone; on EPIPE, records it and calls the handler (once, off
    /// the lock).
    private static func writeRaw(_ text: String, to descriptor: Int32, _ state: inout State) {
        guard !state.readerGone else { return }
        if !Console.tryWrite(text, to: descriptor) {
            state.readerGone = true
            if let handler = state.onReaderGone { DispatchQueue.global().async { handler() } }
        }
    }
}
