import HaulCore

enum ListCommand: Command {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List jobs: id, state, attempts, size, URL → destination.",
        arguments: "",
        options: [
            .init(names: ["--state"], value: "STATE", help: "Only jobs in STATE (queued, running, done, failed, cancelled)."),
            .init(names: ["--host"], value: "HOST", help: "Only jobs of HOST (host:port, as in `haul status`)."),
            .init(names: ["--limit"], value: "N", help: "At most N jobs (default 100)."),
            .init(names: ["--json"], value: nil, help: "Print a JSON array."),
        ])

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        try requireNoPositionals(arguments)
        var filter = JobFilter()
        if let text = arguments.value("--state") {
            guard let state = JobState(rawValue: text) else {
                throw UsageError(message: "unknown state '\(text)' (expected one of: \(JobState.allCases.map(\.rawValue).joined(separator: ", ")))", spec: spec)
            }
            filter.state = state
        }
        if let host = arguments.value("--host") {
            filter.host = host.contains(":") ? host : nil
            if filter.host == nil {
                throw UsageError(message: "--host takes host:port, e.g. example.org:443", spec: spec)
            }
        }
        filter.limit = try CommandLineParser.positiveInt(arguments, "--limit", spec: spec) ?? 100
        let queue = try openQueue(arguments)
        let jobs = try queue.list(filter)
        if arguments.flag("--json") {
            Console.out(JSON.array(jobs.map(JobPresentation.json)).text)
        } else {
            for job in jobs { Console.out(JobPresentation.line(job)) }
        }
        return 0
    }
}
