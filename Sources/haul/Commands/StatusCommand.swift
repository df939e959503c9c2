import Dispatch
import Foundation
import HaulCore
import HaulPostgres

enum StatusCommand: Command {
    static let spec = CommandSpec(
        name: "status",
        abstract: "Show how the batch stands: counts by state, bytes, retries, paused hosts, failures.",
        arguments: "",
        options: [
            .init(names: ["--json"], value: nil, help: "Print one JSON object (with --watch, one per line)."),
            .init(names: ["-w", "--watch"], value: "SECONDS",
                  help: "Show it again every SECONDS (default 2), with rates, until interrupted.", optionalValue: true),
        ],
        discussion: """
            Answers at any time, also while `haul run` is working on the same database.
            With --watch on a terminal the status is redrawn in place, fitted to the terminal;
            otherwise each snapshot is printed in turn. Ctrl-C ends it (exit 0).
            """)

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        try requireNoPositionals(arguments)
        let every = arguments.flag("--watch") ? try interval(arguments) : nil  // a usage error, whatever the queue
        let queue = try openQueue(arguments)
        guard let every else {
            let snapshot = try Snapshot(queue)
            if arguments.flag("--json") { Console.out(json(snapshot).text) } else { for line in lines(snapshot) { Console.out(line) } }
            return 0
        }
        return try watch(queue, every: every, json: arguments.flag("--json"))
    }

    private static func interval(_ arguments: ParsedArguments) throws -> Double {
        guard let text = arguments.value("--watch"), !text.isEmpty else { return 2 }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0.1, seconds <= 86_400 else {
            throw UsageError(message: "'--watch' needs a number of seconds from 0.1 to 86400, not '\(text)'", spec: spec)
        }
        return seconds
    }

    /// The queue's status and the running jobs whose haul is gone, read at one moment.
    struct Snapshot {
        let status: QueueStatus
        let abandoned: Int
        let now: Int
        let at: Double
        /// The workers registered on a shared (PostgreSQL) queue, with their last heartbeats;
        /// nil for a SQLite queue.
        let workers: [(name: String, heartbeatAt: Int)]?

        init(_ queue: any JobStore) throws {
            status = try queue.status()
            now = try queue.now()
            at = Date().timeIntervalSince1970
            workers = try (queue as? PostgresJobStore)?.workers().map { (name: $0.name, heartbeatAt: $0.heartbeatAt) }
            // Running jobs whose haul is gone (killed, crashed): the next run takes them back.
            abandoned = (status.counts[.running] ?? 0) == 0 ? 0 : try queue.runningJobsByOwner()
                .filter { LeaseOwner($0.owner).map(ProcessIdentity.isDead) ?? false }
                .reduce(0) { $0 + $1.jobs }
        }

        var finished: Int { (status.counts[.done] ?? 0) + (status.counts[.failed] ?? 0) + (status.counts[.cancelled] ?? 0) }
    }

    /// Bytes and jobs ended per second between two snapshots.
    struct Rates {
        let bytesPerSecond: Double
        let jobsPerSecond: Double

        init(from earlier: Snapshot, to later: Snapshot) {
            let seconds = max(later.at - earlier.at, 0.001)
            bytesPerSecond = Double(max(0, later.status.receivedBytes - earlier.status.receivedBytes)) / seconds
            jobsPerSecond = Double(max(0, later.finished - earlier.finished)) / seconds
        }
    }

    /// The status as JSON; with `watching`, also its time and the rates since the snapshot before
    /// (null on the first).
    static func json(_ snapshot: Snapshot, watching: Bool = false, rates: Rates? = nil) -> JSON {
        let status = snapshot.status
        var fields: [(String, JSON)] = [
            ("counts", .object(JobState.allCases.map { ($0.rawValue, .int(status.counts[$0] ?? 0)) })),
            ("total", .int(status.total)),
            ("abandoned", .int(snapshot.abandoned)),
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
            ("limited_hosts", .array(status.limitedHosts.map {
                .object([("host", .string($0.host)), ("limit", .int($0.limit)), ("cap", .int($0.cap))])
            })),
            ("top_failures", .array(status.topFailures.map {
                .object([("reason", .string(HTTPURL.redact($0.reason))), ("count", .int($0.count))])
            })),
        ]
        if let workers = snapshot.workers {
            fields.append(("workers", .array(workers.map {
                .object([("name", .string($0.name)), ("heartbeat_at", .string(Format.timestamp($0.heartbeatAt)))])
            })))
        }
        if watching {
            fields.insert(("time", .string(Format.timestamp(snapshot.now))), at: 0)
            fields.append(("rates", rates.map {
                .object([("bytes_per_second", .number($0.bytesPerSecond)), ("jobs_per_second", .number($0.jobsPerSecond))])
            } ?? .null))
        }
        return .object(fields)
    }

    static func lines(_ snapshot: Snapshot) -> [String] {
        let status = snapshot.status
        let now = snapshot.now
        var lines: [String] = []
        let counts = JobState.allCases.map { "\($0.rawValue) \(status.counts[$0] ?? 0)" }.joined(separator: ", ")
        lines.append("\(Console.bold("jobs")):    \(status.total) — \(counts)")
        if let running = status.counts[.running], running > 0 {
            let ahead = max(0, running - status.slotsHeld)
            lines.append("\(Console.bold("running")): \(status.slotsHeld) transferring" + (ahead > 0 ? ", \(ahead) claimed ahead, waiting for a slot" : ""))
        }
        let abandoned = snapshot.abandoned
        if abandoned > 0 {
            lines.append("\(Console.bold("abandoned")): \(abandoned) of the running \(abandoned == 1 ? "job's haul is" : "jobs' hauls are") gone; the next `haul run` takes \(abandoned == 1 ? "it" : "them") back")
        }
        var bytes = "\(Format.bytes(status.receivedBytes)) received of \(Format.bytes(status.expectedBytes)) known"
        if status.unknownSize > 0 { bytes += " (\(status.unknownSize) \(status.unknownSize == 1 ? "job" : "jobs") of unknown size)" }
        lines.append("\(Console.bold("bytes")):   \(bytes)")
        if let next = status.nextRetryAt {
            lines.append("\(Console.bold("retries")): \(status.waitingForRetry) waiting; next due \(Format.relative(next, now: now)) (\(Format.timestamp(next)))")
        } else {
            lines.append("\(Console.bold("retries")): none waiting")
        }
        if status.pausedHosts.isEmpty {
            lines.append("\(Console.bold("paused")):  no host")
        } else {
            for host in status.pausedHosts {
                lines.append("\(Console.bold("paused")):  \(host.host) until \(Format.timestamp(host.until)) (\(Format.relative(host.until, now: now)))\(host.reason.map { ": \($0)" } ?? "")")
            }
        }
        for host in status.limitedHosts {
            lines.append("\(Console.bold("limited")): \(host.host) held to \(host.limit) of \(host.cap) at once: it answered 429 or 503 (overloaded); one more after each run of successes")
        }
        for failure in status.topFailures {
            lines.append("\(Console.bold("failed")):  \(failure.count) × \(HTTPURL.redact(failure.reason))")
        }
        if let workers = snapshot.workers {
            let named = workers.map { "\($0.name) (heard from \(max(0, (now - $0.heartbeatAt) / 1000)) s ago)" }
            lines.append("\(Console.bold("workers")): \(workers.isEmpty ? "none running" : named.joined(separator: ", "))")
        }
        return lines
    }

    /// Shows the status every `interval` seconds until SIGINT or SIGTERM: redrawn in place on a
    /// terminal (fitted to its size, asked each time), one block (or JSON line) after another
    /// otherwise.
    private static func watch(_ queue: any JobStore, every interval: Double, json: Bool) throws -> Int32 {
        let stop = DispatchSemaphore(value: 0)
        let signals = SignalWatcher { _ in stop.signal() }
        let terminal = !json && Console.stdoutIsTerminal
        var block = LiveBlock()
        var previous: Snapshot? = nil
        repeat {
            let snapshot = try Snapshot(queue)
            let rates = previous.map { Rates(from: $0, to: snapshot) }
            if json {
                Console.out(self.json(snapshot, watching: true, rates: rates).text)
            } else {
                var text = ["haul status, every \(Format.duration(interval)), at \(Format.timestamp(snapshot.now)) (Ctrl-C to stop)"]
                text += lines(snapshot)
                text.append("\(Console.bold("rates")):   " + (rates.map {
                    "\(Format.bytes(Int($0.bytesPerSecond)))/s, \(String(format: "%.1f", $0.jobsPerSecond)) jobs/s"
                } ?? "from the next snapshot on"))
                if terminal {
                    let size = Terminal.size(of: STDOUT_FILENO)
                    // Never more rows than the screen has: the block must stay where it can be erased.
                    Console.write(block.draw(Array(text.prefix(max(1, size.rows - 1))), columns: size.columns), to: STDOUT_FILENO)
                } else {
                    Console.out(text.joined(separator: "\n") + "\n")
                }
            }
            previous = snapshot
        } while stop.wait(timeout: .now() + interval) == .timedOut
        if terminal && block.isShown { Console.write("\n", to: STDOUT_FILENO) }
        withExtendedLifetime(signals) {}
        return 0
    }
}
