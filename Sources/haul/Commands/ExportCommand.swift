import Foundation
import HaulCore

/// `haul export`: one record per job, as JSON lines or CSV, streamed: a page of jobs at a time
/// from the queue, out in large chunks, so ten million jobs take no more memory than ten.
enum ExportCommand: Command {
    static let spec = CommandSpec(
        name: "export",
        abstract: "Write one record per job, as JSON lines or CSV, for scripts and spreadsheets.",
        arguments: "",
        options: [
            .init(names: ["--state"], value: "STATE", help: "Only jobs in STATE (queued, running, done, failed, cancelled)."),
            .init(names: ["--format"], value: "FORMAT", help: "jsonl (one JSON object a line; the default) or csv (RFC 4180: a header row, CRLF line ends)."),
            .init(names: ["-o", "--output"], value: "FILE", help: "Write to FILE, created (with the umask) or emptied; - or none: standard output."),
        ],
        discussion: """
            Fields, in order: id, destination (where the file is), url, final_url (after redirects), state,
            bytes, checksum (the one given, as sha256=HEX), file_sha256 (run --checksum sha256), etag,
            last_modified, content_type, last_status (HTTP), attempts, finished_at (ISO 8601, UTC), kept
            (true: done by keeping a file already there), last_error, placed_by (the worker that placed the
            file: --worker, else its host name). Unknown: null, or an empty CSV field.
            Credentials in URLs are hidden.
            """)

    /// Jobs read from the queue at a time.
    static let batch = 1_000

    static func run(_ arguments: ParsedArguments) throws -> Int32 {
        try requireNoPositionals(arguments)
        var state: JobState?
        if let text = arguments.value("--state") {
            guard let parsed = JobState(rawValue: text) else {
                throw UsageError(message: "unknown state '\(text)' (expected one of: \(JobState.allCases.map(\.rawValue).joined(separator: ", ")))", spec: spec)
            }
            state = parsed
        }
        var format = ExportFormat.jsonl
        if let text = arguments.value("--format") {
            guard let parsed = ExportFormat(rawValue: text) else {
                throw UsageError(message: "unknown format '\(text)' (expected one of: \(ExportFormat.allCases.map(\.rawValue).joined(separator: ", ")))", spec: spec)
            }
            format = parsed
        }
        let path = arguments.value("--output").flatMap { $0 == "-" ? nil : $0 }
        if path?.isEmpty == true {
            throw UsageError(message: "'-o' needs a file name ('-' for standard output)", spec: spec)
        }
        // The queue first: a missing database creates no output file.
        let queue = try openQueue(arguments)
        if let path { try refuseDatabase(path, database: queue.location) }
        let output = try path.map { try BufferedOutput.create(path: $0) } ?? BufferedOutput.standardOutput()
        if let header = format.header { try output.write(header) }
        try queue.forEachJob(state: state, after: 0, batch: batch) { job in
            try output.append { format.append(job, to: &$0) }
        }
        try output.finish()
        return 0
    }

    /// `-o` naming the queue itself (or its journal) would empty it before a record was read.
    private static func refuseDatabase(_ path: String, database: String) throws {
        var target = stat()
        guard stat(path, &target) == 0 else { return }
        for file in [database, database + "-wal", database + "-shm"] {
            var info = stat()
            if stat(file, &info) == 0, info.st_dev == target.st_dev, info.st_ino == target.st_ino {
                throw CommandFailure(message: "-o \(path) is the queue database\(file == database ? "" : "'s journal") (\(file)); name another file")
            }
        }
    }
}
