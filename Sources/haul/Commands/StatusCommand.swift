import HaulCore

enum StatusCommand: Command {
    static let spec = CommandSpec(
        name: "status",
        abstract: "Show how the batch stands: counts by state, bytes, retries, paused hosts, failures.",
        arguments: "",
        options: [.init(names: ["--json"], value: nil, help: "Print one JSON object.")],
        discussion: "Answers at any time, also while `haul run` is working on the same database.")

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        try requireNoPositionals(arguments)
        let queue = try openQueue(arguments)
        let status = try queue.status()
        let now = queue.clock()
        // Running jobs whose haul is gone (killed, crashed): the next run takes them back.
        let abandoned = (status.counts[.running] ?? 0) == 0 ? 0 : try queue.runningJobsByOwner()
            .filter { LeaseOwner($0.owner).map(ProcessIdentity.isDead) ?? false }
            .reduce(0) { $0 + $1.jobs }
        if arguments.flag("--json") {
            Console.out(JSON.object([
                ("counts", .object(JobState.allCases.map { ($0.rawValue, .int(status.counts[$0] ?? 0)) })),
                ("total", .int(status.total)),
                ("abandoned", .int(abandoned)),
                ("transferring", .int(status.slotsHeld)),
                ("bytes", .object([
                    ("received", .int(status.receivedBytes)),
                    ("expected", .int(status.expectedBytes)),
                    ("jobs_of_unknown_size", .int(status.unknownSize)),
                ])),
                ("waiting_for_retry", .int(status.waitingForRetry)),
                ("next_retry_at", status.nextRetryAt.map { .string(Format.timestamp($0)) } ?? .null),
                ("paused_hosts", .array(status.pausedHosts.map {
                    .object([("host", .string($0.host)), ("until", .string(Format.timestamp($0.until))),
                             ("reason", .optional($0.reason))])
                })),
                ("top_failures", .array(status.topFailures.map {
                    .object([("reason", .string(HTTPURL.redact($0.reason))), ("count", .int($0.count))])
                })),
            ]).text)
            return 0
        }
        let counts = JobState.allCases.map { "\($0.rawValue) \(status.counts[$0] ?? 0)" }.joined(separator: ", ")
        Console.out("\(Console.bold("jobs")):    \(status.total) — \(counts)")
        if let running = status.counts[.running], running > 0 {
            let ahead = max(0, running - status.slotsHeld)
            Console.out("\(Console.bold("running")): \(status.slotsHeld) transferring" + (ahead > 0 ? ", \(ahead) claimed ahead, waiting for a slot" : ""))
        }
        if abandoned > 0 {
            Console.out("\(Console.bold("abandoned")): \(abandoned) of the running \(abandoned == 1 ? "job's haul is" : "jobs' hauls are") gone; the next `haul run` takes \(abandoned == 1 ? "it" : "them") back")
        }
        var bytes = "\(Format.bytes(status.receivedBytes)) received of \(Format.bytes(status.expectedBytes)) known"
        if status.unknownSize > 0 { bytes += " (\(status.unknownSize) \(status.unknownSize == 1 ? "job" : "jobs") of unknown size)" }
        Console.out("\(Console.bold("bytes")):   \(bytes)")
        if let next = status.nextRetryAt {
            Console.out("\(Console.bold("retries")): \(status.waitingForRetry) waiting; next due \(Format.relative(next, now: now)) (\(Format.timestamp(next)))")
        } else {
            Console.out("\(Console.bold("retries")): none waiting")
        }
        if status.pausedHosts.isEmpty {
            Console.out("\(Console.bold("paused")):  no host")
        } else {
            for host in status.pausedHosts {
                Console.out("\(Console.bold("paused")):  \(host.host) until \(Format.timestamp(host.until)) (\(Format.relative(host.until, now: now)))\(host.reason.map { ": \($0)" } ?? "")")
            }
        }
        for failure in status.topFailures {
            Console.out("\(Console.bold("failed")):  \(failure.count) × \(HTTPURL.redact(failure.reason))")
        }
        return 0
    }
}
