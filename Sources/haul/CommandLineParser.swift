/// A command's options and help text, in the manner of swift-argument-parser.
struct CommandSpec {
    struct Option {
        let names: [String]          // e.g. ["-i", "--input"]
        let value: String?           // value name, nil for a flag
        let help: String
        var repeatable = false
        /// The value may be left out (`--watch`, `--watch 5`, `--watch=5`): the next argument is
        /// taken as the value only when it is a number.
        var optionalValue = false

        /// "<seconds>", or "[<seconds>]" when it may be left out.
        var valueLabel: String? {
            value.map { optionalValue ? "[<\($0.lowercased())>]" : "<\($0.lowercased())>" }
        }
    }

    let name: String
    let abstract: String
    let arguments: String            // e.g. "[URL…]"
    let options: [Option]
    var discussion: String = ""

    static let dbOption = Option(names: ["--db"], value: "PATH|URL",
                                 help: "The queue: a SQLite file, or postgres://USER@HOST:PORT/DB for a queue shared by many machines (default: $HAUL_DB, or ./haul.db).")
    static let helpOption = Option(names: ["-h", "--help"], value: nil, help: "Show help for this command.")

    var allOptions: [Option] { options + [Self.dbOption, Self.helpOption] }

    var usage: String {
        let flags = options.map { option in
            "[\(option.names.last!)\(option.value.map { option.optionalValue ? " [\($0)]" : " \($0)" } ?? "")]"
        }.joined(separator: " ")
        return "haul \(name) \(flags) [--db PATH|URL] \(arguments)".replacingOccurrences(of: "  ", with: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    var help: String {
        var text = "OVERVIEW: \(abstract)\n\nUSAGE: \(usage)\n"
        if !discussion.isEmpty { text += "\n\(discussion)\n" }
        text += "\nOPTIONS:\n"
        for option in allOptions {
            let label = option.names.joined(separator: ", ") + (option.valueLabel.map { " " + $0 } ?? "")
            let padded = label.count < 26 ? label + String(repeating: " ", count: 26 - label.count) : label + "\n" + String(repeating: " ", count: 28)
            text += "  \(padded)\(option.help)\n"
        }
        return text
    }
}

/// The arguments of one command, parsed.
struct ParsedArguments {
    var values: [String: [String]] = [:]  // keyed by the option's long name
    var positionals: [String] = []
    var wantsHelp = false

    func flag(_ name: String) -> Bool { values[name] != nil }
    func value(_ name: String) -> String? { values[name]?.last }
}

/// A mistake in how a command was called: printed with the usage, exit 64.
struct UsageError: Error {
    let message: String
    let spec: CommandSpec?
}

/// A failure that is not a usage mistake: one line on stderr, exit 1 (or `code`).
struct CommandFailure: Error {
    let message: String
    var code: Int32 = 1
}

enum CommandLineParser {
    static func parse(_ arguments: [String], for spec: CommandSpec) throws -> ParsedArguments {
        var result = ParsedArguments()
        var arguments = arguments
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || argument == "-" || !argument.hasPrefix("-") {
                result.positionals.append(argument)
                continue
            }
            if argument == "--" { onlyPositionals = true; continue }
            if !argument.hasPrefix("--"), argument.count > 2 {
                // Short options together, as getopt reads them (curl, wget, aria2c): flags
                // bundled (-qk), and a value attached to the last one (-j4, -ofile, -qj4).
                arguments.replaceSubrange((index - 1)..<index, with: try splitShortOptions(argument, spec: spec))
                index -= 1
                continue
            }
            var name = argument
            var inlineValue: String? = nil
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let option = spec.allOptions.first(where: { $0.names.contains(name) }) else {
                throw UsageError(message: "unknown option '\(name)'", spec: spec)
            }
            let key = option.names.last!
            if key == "--help" { result.wantsHelp = true; continue }
            if option.value != nil {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else if option.optionalValue {
                    if index < arguments.count, Double(arguments[index]) != nil {
                        value = arguments[index]
                        index += 1
                    } else {
                        value = ""
                    }
                } else {
                    guard index < arguments.count else {
                        throw UsageError(message: "missing value for '\(name) <\(option.value!.lowercased())>'", spec: spec)
                    }
                    value = arguments[index]
                    index += 1
                }
                if !option.repeatable, result.values[key] != nil {
                    throw UsageError(message: "'\(key)' given more than once", spec: spec)
                }
                result.values[key, default: []].append(value)
            } else {
                guard inlineValue == nil else { throw UsageError(message: "'\(name)' takes no value", spec: spec) }
                result.values[key] = []
            }
        }
        return result
    }

    /// `-qj4` as `-q`, `--jobs=4`: letters while they name flags, then one that takes a value,
    /// the rest of the argument being that value (when there is a rest; else the next argument).
    static func splitShortOptions(_ argument: String, spec: CommandSpec) throws -> [String] {
        var parts: [String] = []
        var letters = argument.dropFirst()
        while let letter = letters.first {
            letters = letters.dropFirst()
            let name = "-\(letter)"
            guard let option = spec.allOptions.first(where: { $0.names.contains(name) }) else {
                throw UsageError(message: "unknown option '\(name)'\(parts.isEmpty && letters.isEmpty ? "" : " in '\(argument)'")", spec: spec)
            }
            if option.value != nil {
                // An attached value is the value, even one that looks like another option.
                parts.append(letters.isEmpty ? name : "\(option.names.last!)=\(letters)")
                break
            }
            parts.append(name)
        }
        return parts
    }

    /// A whole number option from 1 to `maximum`, or a usage error naming it (a number past what
    /// haul can count with would trap, not fail).
    static func positiveInt(_ parsed: ParsedArguments, _ name: String, maximum: Int, spec: CommandSpec) throws -> Int? {
        guard let text = parsed.value(name) else { return nil }
        guard let value = Int(text), value > 0, value <= maximum else {
            throw UsageError(message: "'\(name)' needs a whole number from 1 to \(maximum), not '\(text)'", spec: spec)
        }
        return value
    }
}

import Foundation
