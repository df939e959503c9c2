import HaulCore

enum CancelCommand: Command {
    static let spec = CommandSpec(
        name: "cancel",
        abstract: "Cancel jobs; a running transfer is abandoned and its result discarded.",
        arguments: "ID…",
        options: [])

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        let ids = try jobIDs(arguments)
        guard !ids.isEmpty else { throw UsageError(message: "give the ids of the jobs to cancel", spec: spec) }
        let queue = try openQueue(arguments)
        return RetryCommand.report(try queue.cancel(ids), ids: ids, verb: "cancelled", applies: "queued, running or failed")
    }
}
