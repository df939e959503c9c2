import HaulCore

/// One `haul` subcommand: its spec (options, help) and what it does with parsed arguments.
protocol Command {
    static var spec: CommandSpec { get }
    /// Runs the command and returns the process's exit code.
    static func run(_ arguments: ParsedArguments) throws -> Int32
}

extension Command {
    /// The database path from --db, else $HAUL_DB, else ./haul.db.
    /// A server URL's scheme is lower-cased (libpq knows `postgres://` in lower case only).
    static func databasePath(_ arguments: ParsedArguments) -> String {
        if let path = arguments.value("--db") { return StoreOpener.normalized(path) }
        if let path = ProcessInfo.processInfo.environment["HAUL_DB"], !path.isEmpty { return StoreOpener.normalized(path) }
        return "haul.db"
    }

    /// Opens the queue; commands that only read or change existing jobs never create it.
    static func openQueue(_ arguments: ParsedArguments, create: Bool = false) throws -> any JobStore {
        let location = databasePath(arguments)
        if let problem = StoreOpener.refusal(location) {
            throw UsageError(message: "\(arguments.value("--db") != nil ? "--db" : "HAUL_DB") \(problem)", spec: spec)
        }
        return try StoreOpener.open(location, create: create, busyTimeout: try busyTimeout())
    }

    /// How long to wait for another process's lock on the database, in seconds: $HAUL_BUSY_TIMEOUT
    /// when set (a number of seconds, 0 or more), else 10.
    static func busyTimeout() throws -> Double {
        guard let text = ProcessInfo.processInfo.environment["HAUL_BUSY_TIMEOUT"], !text.isEmpty else { return 10 }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0, seconds <= 86_400 else {
            throw CommandFailure(message: "HAUL_BUSY_TIMEOUT must be a number of seconds from 0 to 86400, not '\(text)'")
        }
        return seconds
    }

    /// One clear line for an error that reached the command line: a database error names the
    /// database and says what to do.
    static func explain(_ error: any Error, _ arguments: ParsedArguments) -> String {
        guard let error = error as? StoreError else { return "\(error)" }
        return error.explained(location: StoreOpener.displayLocation(databasePath(arguments)), busyTimeout: (try? busyTimeout()) ?? 10)
    }

    static func requireNoPositionals(_ arguments: ParsedArguments) throws {
        if let extra = arguments.positionals.first {
            throw UsageError(message: "unexpected argument '\(extra)'", spec: spec)
        }
    }

    /// Job ids from positionals, or a usage error naming the bad one.
    static func jobIDs(_ arguments: ParsedArguments) throws -> [Int] {
        try arguments.positionals.map { text in
            guard let id = Int(text), id > 0 else {
                throw UsageError(message: "'\(text)' is not a job id (a whole number, as `haul list` shows)", spec: spec)
            }
            return id
        }
    }
}

import Foundation
