import HaulCore

/// One `haul` subcommand: its spec (options, help) and what it does with parsed arguments.
protocol Command {
    static var spec: CommandSpec { get }
    /// Runs the command and returns the process's exit code.
    static func run(_ arguments: ParsedArguments) throws -> Int32
}

extension Command {
    /// The database path from --db, else $HAUL_DB, else ./haul.db.
    static func databasePath(_ arguments: ParsedArguments) -> String {
        if let path = arguments.value("--db") { return path }
        if let path = ProcessInfo.processInfo.environment["HAUL_DB"], !path.isEmpty { return path }
        return "haul.db"
    }

    /// Opens the queue; commands that only read or change existing jobs never create it.
    static func openQueue(_ arguments: ParsedArguments, create: Bool = false) throws -> JobQueue {
        try JobQueue(path: databasePath(arguments), mode: create ? .createIfMissing : .mustExist)
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
