import Foundation
import HaulCore

enum ListCommand: Command {
    static let spec = CommandSpec(
        name: "list",
        abstract: "List jobs: id, state, attempts, size, URL → destination.",
        arguments: "",
        options: [
            .init(names: ["--state"], value: "STATE", help: "Only jobs in STATE (queued, running, done, failed, cancelled)."),
            .init(names: ["--host"], value: "HOST", help: "Only jobs of HOST (host:port as `haul status` shows it, or a bare host for every port)."),
            .init(names: ["--limit"], value: "N", help: "At most N jobs (default 100; 0 for all)."),
            .init(names: ["--json"], value: nil, help: "Print a JSON array."),
        ])

    /// Jobs are read a page at a time, so listing a million of them takes no more memory than this.
    static let pageSize = 1_000

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
            guard !host.isEmpty, !host.contains("/") else {
                throw UsageError(message: "--host takes a host (example.org) or host:port (example.org:443), not '\(host)'", spec: spec)
            }
            filter.host = HTTPURL.canonicalHost(host)
        }
        var limit = 100
        if let text = arguments.value("--limit") {
            guard let value = Int(text), value >= 0 else {
                throw UsageError(message: "'--limit' needs a whole number (0 for all), not '\(text)'", spec: spec)
            }
            limit = value == 0 ? .max : value
        }
        let queue = try openQueue(arguments)
        let json = arguments.flag("--json")
        if json { Console.write("[", to: STDOUT_FILENO) }
        var listed = 0
        while listed < limit {
            filter.limit = min(pageSize, limit - listed)
            let page = try queue.list(filter)
            for job in page {
                if json {
                    Console.write((listed > 0 ? "," : "") + JobPresentation.json(job).text, to: STDOUT_FILENO)
                } else {
                    Console.out(JobPresentation.line(job))
                }
                listed += 1
            }
            guard let last = page.last, page.count == filter.limit else { break }
            filter.afterID = last.id
        }
        if json { Console.write("]\n", to: STDOUT_FILENO) }
        if listed == limit, limit != .max {
            let more = try queue.count(filter)
            if more > 0 {
                Console.error("haul: listed the first \(listed); \(more) more \(more == 1 ? "matches" : "match") (--limit 0 for all)")
            }
        }
        return 0
    }
}
