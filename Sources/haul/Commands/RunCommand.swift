import Dispatch
import Foundation
import HaulCore

enum RunCommand: Command {
    static let runOptions: [CommandSpec.Option] = [
        .init(names: ["-j", "--jobs"], value: "N", help: "Transfers at once, over all hosts (default 16). haul raises its limit on open files (ulimit -n) to the hard limit, and refuses an N that limit cannot hold."),
        .init(names: ["--per-host"], value: "N", help: "Transfers at once to one host, over every haul process; kept with the queue for later runs (default 4)."),
        .init(names: ["--max-attempts"], value: "N", help: "Attempts per job before it fails (default 5)."),
        .init(names: ["--stall"], value: "SECONDS", help: "Abandon an attempt after this long without data (default 60)."),
        .init(names: ["--timeout"], value: "SECONDS", help: "Abandon an attempt after this long in all (default: none)."),
        .init(names: ["--max-retry-after"], value: "SECONDS", help: "Honour a server's Retry-After up to this long (default 3600); 0 ignores it (the usual backoff applies)."),
        .init(names: ["--max-host-down"], value: "SECONDS", help: "How long a host that answered earlier in the run may stay unreachable (probed one request at a time) before its jobs fail, which they do only once it has also failed as often as a job may be tried (default 120; 0: after those tries alone)."),
        .init(names: ["--if-exists"], value: "POLICY", help: "For this run, whatever the jobs were added with: skip, replace or rename a file already at a destination that haul did not place."),
        .init(names: ["--checksum"], value: "ALGORITHM", help: "Compute and record the digest of every file placed (sha256, shown by show and export)."),
        .init(names: ["--worker"], value: "NAME", help: "This worker's name, recorded with every file it places and shown by show and export (default: the machine's host name; also $HAUL_WORKER)."),
        .init(names: ["--transport"], value: "NAME", help: "curl (default) or urlsession; also $HAUL_TRANSPORT."),
        .init(names: ["-q", "--quiet"], value: nil, help: "Print only the final summary."),
        .init(names: ["--json"], value: nil, help: "Print one JSON object per event, and the summary, on stdout."),
    ] + RequestOptions.connectionOptions

    static let spec = CommandSpec(
        name: "run",
        abstract: "Download every queued job; wait for retries; print a summary.",
        arguments: "",
        options: runOptions,
        discussion: """
            Runs until every job is done, failed or cancelled. Files are written to a hidden temp
            file beside the destination and moved into place only once complete and verified.
            Interrupted transfers resume where they stopped (Range + If-Range). Ctrl-C stops
            cleanly (jobs go back to the queue; press it again to quit at once).
            Exit status: 0 when every job this run worked on ended done, 1 when any of them failed,
            130/143 when interrupted. Jobs that failed in earlier runs do not change it: the
            summary notes them (`haul retry --failed` queues them again). An output folder that
            cannot be written (missing, not writable, read-only, full) uses no attempts: its jobs
            wait while haul tries it again at growing intervals; when nothing else is left, the
            run stops with exit 1, its jobs still queued.
            """)

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        try requireNoPositionals(arguments)
        // Usage errors first: they do not depend on the queue.
        let options = try engineOptions(arguments, spec: spec)
        let connection = try RequestOptions.connection(arguments, spec: spec)
        let queue = try openQueue(arguments)
        return try download(queue: queue, options: options, connection: connection, arguments: arguments, spec: spec)
    }

    static func engineOptions(_ arguments: ParsedArguments, spec: CommandSpec) throws -> EngineOptions {
        var options = EngineOptions()
        // Bounds far past any use, each a number the engine's arithmetic holds (a host's slots
        // are numbered below 65,536 in a PostgreSQL queue's locks).
        if let value = try CommandLineParser.positiveInt(arguments, "--jobs", maximum: 100_000, spec: spec) { options.workers = value }
        if let value = try CommandLineParser.positiveInt(arguments, "--per-host", maximum: 10_000, spec: spec) { options.perHost = value }
        if let value = try CommandLineParser.positiveInt(arguments, "--max-attempts", maximum: 1_000, spec: spec) { options.maxAttempts = value }
        if let value = try seconds(arguments, "--stall", spec: spec) { options.stallTimeout = value }
        if let value = try seconds(arguments, "--timeout", spec: spec) { options.totalTimeout = value }
        if let value = try seconds(arguments, "--max-retry-after", spec: spec, allowZero: true) { options.maxRetryAfter = value }
        if let value = try seconds(arguments, "--max-host-down", spec: spec, allowZero: true) { options.maxHostDown = value }
        if let name = arguments.value("--worker") ?? ProcessInfo.processInfo.environment["HAUL_WORKER"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard !name.isEmpty, name.count <= 200, !name.contains(where: { $0.isNewline || $0 == "/" }) else {
                let requirement = "a name of 1 to 200 characters without '/' or line breaks"
                if arguments.value("--worker") == nil {
                    throw CommandFailure(message: "HAUL_WORKER must be \(requirement): set it so, or unset it")
                }
                throw UsageError(message: "'--worker' needs \(requirement)", spec: spec)
            }
            options.workerName = name
        }
        if spec.name == "run" { options.ifExists = try AddCommand.existingFilePolicy(arguments, spec: spec) }
        if let algorithm = arguments.value("--checksum") {
            guard algorithm == "sha256" else {
                throw UsageError(message: "'--checksum' computes sha256, not '\(algorithm)'", spec: spec)
            }
            options.recordSHA256 = true
        }
        return options
    }

    private static func seconds(_ arguments: ParsedArguments, _ name: String, spec: CommandSpec, allowZero: Bool = false) throws -> Double? {
        guard let text = arguments.value(name) else { return nil }
        // At most a year: the engine counts in milliseconds, and 1e300 seconds would not fit.
        guard let value = Double(text), value.isFinite, allowZero ? value >= 0 : value > 0, value <= 31_536_000 else {
            throw UsageError(message: "'\(name)' needs a number of seconds\(allowZero ? "" : " greater than 0"), at most a year (31536000), not '\(text)'", spec: spec)
        }
        return value
    }

    /// The transport named by `--transport`, else by `HAUL_TRANSPORT`, else the default.
    static func transportKind(_ arguments: ParsedArguments, spec: CommandSpec) throws -> TransportKind {
        let names = TransportKind.allCases.map(\.rawValue).joined(separator: " or ")
        if let name = arguments.value("--transport") {
            guard let kind = TransportKind(name: name) else {
                throw UsageError(message: "'--transport' is \(names), not '\(name)'", spec: spec)
            }
            return kind
        }
        if let name = ProcessInfo.processInfo.environment["HAUL_TRANSPORT"], !name.isEmpty {
            guard let kind = TransportKind(name: name) else {
                throw CommandFailure(message: "HAUL_TRANSPORT is '\(name)', which is not a transport: set it to \(names), or unset it")
            }
            return kind
        }
        return .default
    }

    /// Runs the engine on `queue` until it finishes or is interrupted; returns the exit code.
    /// `whileRunning`: called once the engine and the reporter exist, before the run starts (`haul
    /// get` starts its import there, feeding the run as it goes); an error it throws ends the
    /// command before the run.
    static func download(queue: any JobStore, options: EngineOptions, connection: ConnectionOptions,
                         arguments: ParsedArguments, spec: CommandSpec,
                         whileRunning: ((DownloadEngine, RunReporter) throws -> Void)? = nil) throws -> Int32 {
        var options = options
        let openFiles = DescriptorBudget.raiseSoftLimit()
        if let shortfall = DescriptorBudget.shortfall(workers: options.workers, limit: openFiles) {
            throw CommandFailure(message: shortfall)
        }
        options.openFileLimit = openFiles
        let mode: RunReporter.Mode = arguments.flag("--json") ? .json
            : arguments.flag("--quiet") ? .quiet
            : isatty(STDERR_FILENO) == 1 && !Terminal.isDumb ? .terminal : .plain
        // With stdout sent to a file or a pipe, the lines a script or a log wants go there too.
        let reporter = RunReporter(mode: mode, linesToStdout: isatty(STDOUT_FILENO) == 0)
        options.readsQueueCounts = mode == .terminal  // only the live display shows them
        let transport: any Transport
        do {
            transport = try transportKind(arguments, spec: spec).make(maxTransfers: options.workers, connection: connection)
        } catch let unsupported as TransportKind.Unsupported {
            throw UsageError(message: unsupported.description, spec: spec)
        }
        let engine = DownloadEngine(store: StoreExecutor(queue), transport: transport, options: options) { event in
            reporter.report(event)
        }
        reporter.whenReaderGone { engine.stop() }
        let signals = SignalWatcher { number in
            reporter.interrupted(signal: number)
            engine.stop()
        }
        try whileRunning?(engine, reporter)
        let outcome = RunOutcome()
        let done = DispatchSemaphore(value: 0)
        Task {
            let display = mode == .terminal ? Task {
                while !Task.isCancelled {
                    reporter.showProgress(await engine.currentStats())
                    try? await Task.sleep(for: .milliseconds(250))
                }
            } : nil
            do {
                outcome.set(.success(try await engine.run()))
            } catch {
                outcome.set(.failure(error))
            }
            display?.cancel()
            done.signal()
        }
        done.wait()
        withExtendedLifetime(signals) {}
        let summary = try outcome.get()
        reporter.finish(summary)
        if reporter.readerWasGone { Console.readerGone() }  // after a clean stop: jobs handed back
        if let fault = summary.localFault {
            Console.error("haul: stopped: \(fault)")
            return 1
        }
        if summary.interrupted { return signals.exitCode }
        return summary.failed == 0 ? 0 : 1
    }
}

/// The result of the engine's run, handed from its task to the waiting main thread.
final class RunOutcome: Sendable {
    private let value = Mutex<Result<RunSummary, any Error>?>(nil)
    func set(_ result: Result<RunSummary, any Error>) { value.withLock { $0 = result } }
    func get() throws -> RunSummary {
        guard let result = value.withLock({ $0 }) else { throw CommandFailure(message: "the run ended without a result") }
        return try result.get()
    }
}

import Synchronization
