import Foundation
import HaulCore

enum GetCommand: Command {
    static let spec = CommandSpec(
        name: "get",
        abstract: "Queue URLs and download them in one step (running it again resumes).",
        arguments: "[URL…]",
        options: AddCommand.spec.options.filter { $0.names != ["--json"] }
            + RunCommand.runOptions.filter { $0.names != ["--if-exists"] },
        discussion: """
            The same as `haul add` followed by `haul run`. Rejected input lines are reported and
            skipped; the valid ones are downloaded. With no URLs and no -i, it resumes the queue.
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
        var rejected = 0
        if !arguments.positionals.isEmpty || arguments.value("--input") != nil {
            let summary = try AddCommand.importInput(arguments, spec: spec)
            rejected = summary.rejected
            if !arguments.flag("--json") && !arguments.flag("--quiet") {
                Console.error("queued: added \(summary.added), already queued \(summary.alreadyQueued), rejected \(summary.rejected)")
            }
        }
        let queue = try openQueue(arguments)
        let code = try RunCommand.download(queue: queue, options: options, connection: connection, arguments: arguments, spec: spec)
        return code == 0 && rejected > 0 ? 1 : code
    }
}
