import Foundation
import HaulCore

/// The `haul` command line: parses arguments, runs one command, prints, and exits with
/// 0 (success), 1 (failure, or some input rejected), 64 (usage error).
let version = HaulVersion.string
let commands = Commands.all

let topHelp = """
    OVERVIEW: haul — a resumable bulk HTTP downloader with a crash-proof SQLite job queue.

    USAGE: haul <command> [options]

    COMMANDS:
    \(commands.map { "  \($0.spec.name.padding(toLength: 13, withPad: " ", startingAt: 0))\($0.spec.abstract)" }.joined(separator: "\n"))

    OPTIONS:
      -h, --help       Show help (also `haul <command> --help`).
      --version        Show the version.
      help --man       Print the manual page (haul.1).

    The queue lives in ./haul.db unless --db PATH or $HAUL_DB names another file, or a
    PostgreSQL database (postgres://USER@HOST:PORT/DB) that workers on many machines share.
    """

func exitWithUsage(_ message: String, spec: CommandSpec?) -> Never {
    Console.error("haul: error: \(message)")
    Console.error("usage: \(spec?.usage ?? "haul <command> [options]")")
    Console.error("See 'haul \(spec.map { "\($0.name) " } ?? "")--help'.")
    Console.exit(64)
}

signal(SIGPIPE, SIG_IGN)
// Past a file-size limit (ulimit -f), a write should fail with EFBIG and be reported like any
// other write error, not kill haul.
signal(SIGXFSZ, SIG_IGN)
// Swift turns bytes that are not UTF-8 into U+FFFD: a path given so would name another file
// (a new folder, a new queue) without a word. Such an argument is refused instead.
for index in 1..<Int(CommandLine.argc) {
    guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
    // Its text is not shown: it may be a password (`-u user:pässwort` typed in Latin-1).
    exitWithUsage("argument \(index) is not UTF-8 text: haul takes paths, URLs and names as UTF-8; rename the file or folder", spec: nil)
}
var arguments = Array(CommandLine.arguments.dropFirst())
ArgumentSecrets.hide()  // after Swift's copy of the arguments, which haul parses
guard let first = arguments.first else { exitWithUsage("no command given", spec: nil) }
switch first {
case "-h", "--help", "help":
    if first == "help", arguments.count == 2, arguments[1] == "--man" {
        Console.out(ManPage.text(topHelp: topHelp))
    } else if first == "help", arguments.count > 1 {
        guard let command = commands.first(where: { $0.spec.name == arguments[1] }) else {
            exitWithUsage("unknown command '\(arguments[1])'", spec: nil)
        }
        guard arguments.count == 2 else { exitWithUsage("unexpected argument '\(arguments[2])' after 'help \(arguments[1])'", spec: nil) }
        Console.out(command.spec.help)
    } else {
        Console.out(topHelp)
    }
    Console.exit(0)
case "--version", "version":
    Console.out("haul \(version)\n\(CurlTransport.versionDescription)\nSQLite/\(Database.sqliteVersion)\n\(Allocator.version)")
    Console.exit(0)
default:
    break
}
guard let command = commands.first(where: { $0.spec.name == first }) else {
    exitWithUsage("unknown command '\(first)'", spec: nil)
}
let parsed: ParsedArguments
do {
    parsed = try CommandLineParser.parse(Array(arguments.dropFirst()), for: command.spec)
} catch let error as UsageError {
    exitWithUsage(error.message, spec: error.spec)
} catch {
    exitWithUsage("\(error)", spec: command.spec)
}
if parsed.wantsHelp {
    Console.out(command.spec.help)
    Console.exit(0)
}
do {
    Console.exit(try command.run(parsed))
} catch let error as UsageError {
    exitWithUsage(error.message, spec: error.spec)
} catch let error as CommandFailure {
    Console.error("haul: \(error.message)")
    Console.exit(error.code)
} catch {
    Console.error("haul: \(command.explain(error, parsed))")
    Console.exit(1)
}
