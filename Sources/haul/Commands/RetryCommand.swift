import HaulCore

enum RetryCommand: Command {
    static let spec = CommandSpec(
        name: "retry",
        abstract: "Queue failed or cancelled jobs again, with their attempts reset.",
        arguments: "[ID…]",
        options: [.init(names: ["--failed"], value: nil, help: "Retry every failed job.")])

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        let ids = try jobIDs(arguments)
        let all = arguments.flag("--failed")
        guard all != !ids.isEmpty else {
            throw UsageError(message: all ? "give job ids or --failed, not both" : "give job ids, or --failed", spec: spec)
        }
        let queue = try openQueue(arguments)
        if all {
            Console.out("requeued \(try queue.retryAllFailed()) failed jobs")
            return 0
        }
        return report(try queue.retry(ids), ids: ids, verb: "requeued", applies: "failed or cancelled")
    }

    /// Prints one line per job and returns 1 when any job could not be changed.
    static func report(_ outcomes: [AdminOutcome], ids: [Int], verb: String, applies: String) -> Int32 {
        var code: Int32 = 0
        for (id, outcome) in zip(ids, outcomes) {
            switch outcome {
            case .changed: Console.out("job \(id): \(verb)")
            case .notFound: Console.error("haul: job \(id): no such job"); code = 1
            case .unchanged(let state): Console.error("haul: job \(id): is \(state.rawValue); only \(applies) jobs can be \(verb)"); code = 1
            }
        }
        return code
    }
}
