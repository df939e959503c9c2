import HaulCore

enum ShowCommand: Command {
    static let spec = CommandSpec(
        name: "show",
        abstract: "Show one job and its attempts.",
        arguments: "ID|URL",
        options: [.init(names: ["--json"], value: nil, help: "Print a JSON object (an array when a URL names several jobs).")])

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        guard arguments.positionals.count == 1, let key = arguments.positionals.first else {
            throw UsageError(message: "give one job id or URL", spec: spec)
        }
        let queue = try openQueue(arguments)
        let jobs: [Job]
        if let id = Int(key) {
            jobs = try queue.job(id: id).map { [$0] } ?? []
        } else {
            jobs = try queue.jobs(url: key)
        }
        guard !jobs.isEmpty else {
            throw CommandFailure(message: "no job \(Int(key) != nil ? "with id \(key)" : "for \(HTTPURL.redact(key))"); `haul list` shows the jobs")
        }
        let now = try queue.now()
        if arguments.flag("--json") {
            let objects = try jobs.map { job -> JSON in
                guard case .object(var members) = JobPresentation.json(job) else { return .null }
                members.append(("attempt_log", .array(try queue.attempts(jobID: job.id).map(JobPresentation.json))))
                return .object(members)
            }
            Console.out((objects.count == 1 && Int(key) != nil ? objects[0] : .array(objects)).text)
        } else {
            Console.out(try jobs.map { job in
                let profile = try job.profileID.flatMap { try queue.profile(id: $0) }
                return JobPresentation.details(job, attempts: try queue.attempts(jobID: job.id), profile: profile, now: now)
            }.joined(separator: "\n\n"))
        }
        return 0
    }
}
