import Foundation
import HaulCore
import Synchronization

enum GetCommand: Command {
    static let spec = CommandSpec(
        name: "get",
        abstract: "Queue URLs and download them in one step (running it again resumes).",
        arguments: "[URL…]",
        options: AddCommand.spec.options.filter { $0.names != ["--json"] }
            + RunCommand.runOptions.filter { $0.names != ["--if-exists"] },
        discussion: """
            The same as `haul add` followed by `haul run`, except that downloads start while the
            list is still being read: within milliseconds for a long file, and as lines come for a
            pipe (`-i -`). Rejected input lines are reported and skipped; the valid ones are
            downloaded. With no URLs and no -i, it resumes the queue.
            Exit status: 0 when nothing was rejected and every job this run worked on ended done, 1
            otherwise (jobs that failed in earlier runs are noted, not counted); 130/143 when
            interrupted.
            """)

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        let options = try RunCommand.engineOptions(arguments, spec: spec)
        let connection = try RequestOptions.connection(arguments, spec: spec)
        // Checked before anything is queued: a run that cannot start must not add jobs.
        if let shortfall = DescriptorBudget.shortfall(workers: options.workers, limit: DescriptorBudget.raiseSoftLimit()) {
            throw CommandFailure(message: shortfall)
        }
        do {
            try RunCommand.transportKind(arguments, spec: spec).check(connection)
        } catch let unsupported as TransportKind.Unsupported {
            throw UsageError(message: unsupported.description, spec: spec)
        }
        guard !arguments.positionals.isEmpty || arguments.value("--input") != nil else {
            let queue = try openQueue(arguments)
            return try RunCommand.download(queue: queue, options: options, connection: connection, arguments: arguments, spec: spec)
        }
        // The import runs beside the run, on a connection of its own: the run claims each batch
        // once it is committed, and ends only after the import has ended and the queue drained.
        // The run starts once the first batch is in (or the import ended): a queue that cannot
        // be written (locked, read-only, disk full) stops `get` there, with one line, as before.
        let prepared = try AddCommand.prepareImport(arguments, spec: spec)
        let queue = try openQueue(arguments)
        var runOptions = options
        runOptions.inputOpen = true
        let imported = ImportOutcome()
        let code = try RunCommand.download(queue: queue, options: runOptions, connection: connection, arguments: arguments,
                                           spec: spec) { engine, reporter in
            prepared.report = { reporter.note($0) }
            let firstBatch = DispatchSemaphore(value: 0)
            // Stopped by a signal or a reader gone: the import queues and says nothing more.
            let stopped: @Sendable () -> Bool = { imported.runEnded || reporter.wasInterrupted || reporter.readerWasGone }
            let thread = Thread {
                let feed = URLListImporter.Streaming(afterBatch: {
                    if imported.passFirstBatch() { firstBatch.signal() }
                    engine.inputAdded()
                }, stopped: stopped, waiting: { error, lines, wait in
                    // Said as the run says its own exchanges' failures (nothing with --quiet, an
                    // event with --json).
                    reporter.report(.warning("database: \(error); adding \(prepared.place(of: lines)) again in \(wait / 1000) s"))
                })
                let result = Result { try prepared.run(streaming: feed) }
                // Ended before any batch was in: the main thread, still waiting, says how (below).
                let early = imported.passFirstBatch()
                imported.set(result, early: early)
                switch result {
                case .success(let summary):
                    if !stopped() {
                        reporter.imported(added: summary.added, alreadyQueued: summary.alreadyQueued, rejected: summary.rejected)
                    }
                case .failure(let error) where !early && !stopped():
                    // Said when it happens; the run goes on with what was queued, and its exit
                    // status is then 1.
                    reporter.note("haul: \((error as? CommandFailure)?.message ?? String(describing: error))")
                case .failure:
                    break
                }
                if early { firstBatch.signal() }
                engine.inputClosed()
            }
            thread.start()
            // A signal while the input has not given a line yet (a pipe's writer still silent)
            // stops the run at once: it is then begun only to end.
            while firstBatch.wait(timeout: .now() + .milliseconds(50)) == .timedOut && !stopped() {}
            if !stopped(), case .failure(let error)? = imported.early { throw error }
        }
        // The import queues nothing more once the run ended (stopped by a signal or a reader
        // gone, before the input ended: the lines read so far are queued, the rest are not).
        imported.endRun()
        guard code == 0, let result = imported.result else { return code }
        switch result {
        case .success(let summary): return summary.rejected > 0 ? 1 : 0
        case .failure: return 1  // said when it happened
        }
    }
}

/// The import's result, handed from its thread to the main thread.
final class ImportOutcome: Sendable {
    private let value = Mutex<(result: Result<URLListImporter.Summary, any Error>?, early: Bool, runEnded: Bool)>((nil, false, false))
    /// `early`: the import ended before its first batch was in.
    func set(_ result: Result<URLListImporter.Summary, any Error>, early: Bool) {
        value.withLock { $0.result = result; $0.early = early }
    }
    var result: Result<URLListImporter.Summary, any Error>? { value.withLock { $0.result } }
    /// The result when the import ended before its first batch was in.
    var early: Result<URLListImporter.Summary, any Error>? { value.withLock { $0.early ? $0.result : nil } }
    /// Set once the run has ended: the import then stops before its next batch.
    func endRun() { value.withLock { $0.runEnded = true } }
    private let firstBatch = Mutex(false)
    /// Notes that the first batch is in (or the import ended); true the first time only.
    func passFirstBatch() -> Bool { firstBatch.withLock { passed in defer { passed = true }; return !passed } }
    var runEnded: Bool { value.withLock { $0.runEnded } }
}
