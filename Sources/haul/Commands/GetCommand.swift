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
        let prepared = try AddCommand.prepareImport(arguments, spec: spec)
        let queue = try openQueue(arguments)
        var streaming = options
        streaming.inputOpen = true
        let imported = ImportOutcome()
        let showSummary = !arguments.flag("--json") && !arguments.flag("--quiet")
        let code = try RunCommand.download(queue: queue, options: streaming, connection: connection, arguments: arguments,
                                           spec: spec) { engine, reporter in
            prepared.report = { reporter.note($0) }
            let thread = Thread {
                let result = Result { try prepared.run(streaming: URLListImporter.Streaming(afterBatch: { engine.inputAdded() })) }
                if case .success(let summary) = result, showSummary {
                    reporter.note("queued: added \(summary.added), already queued \(summary.alreadyQueued), rejected \(summary.rejected)")
                }
                imported.set(result)
                engine.inputClosed()
            }
            thread.start()
        }
        // Stopped (a signal, or a reader gone) before the input ended: the lines read so far are
        // queued, the rest are not; the run's code says why it stopped.
        guard let result = imported.result else { return code }
        let summary = try result.get()
        return code == 0 && summary.rejected > 0 ? 1 : code
    }
}

/// The import's result, handed from its thread to the main thread.
final class ImportOutcome: Sendable {
    private let value = Mutex<Result<URLListImporter.Summary, any Error>?>(nil)
    func set(_ result: Result<URLListImporter.Summary, any Error>) { value.withLock { $0 = result } }
    var result: Result<URLListImporter.Summary, any Error>? { value.withLock { $0 } }
}
