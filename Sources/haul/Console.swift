import Foundation
import Synchronization

/// Where the CLI writes: stdout for results, stderr for diagnostics.
///
/// Guarantees: each call writes its whole line with write(2) (no buffering, so lines from
/// several threads never interleave mid-line); when the reader has gone (EPIPE: `haul list |
/// head -1`), haul ends as Unix tools do — killed by SIGPIPE, quietly, with no backtrace.
enum Console {
    static func out(_ text: String) { write(text + "\n", to: STDOUT_FILENO) }

    static func error(_ text: String) { write(text + "\n", to: STDERR_FILENO) }

    static func write(_ text: String, to descriptor: Int32) {
        if !tryWrite(text, to: descriptor) { readerGone() }
    }

    /// Writes all of `text`; false when the reader has gone (EPIPE). Another error on standard
    /// output (a full disk behind a redirect…) is kept for `exit`, which reports it, and nothing
    /// more is written there; one on standard error is dropped: there is nowhere to report it.
    static func tryWrite(_ text: String, to descriptor: Int32) -> Bool {
        if descriptor == STDOUT_FILENO && stdoutError.withLock({ $0 }) != 0 { return true }
        var text = text
        return text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count >= 0 { offset += count; continue }
                let code = errno
                if code == EINTR || code == EAGAIN { continue }
                if code == EPIPE { return false }
                if descriptor == STDOUT_FILENO { stdoutError.withLock { if $0 == 0 { $0 = code } } }
                return true
            }
            return true
        }
    }

    /// The first error writing to standard output other than EPIPE, or 0.
    private static let stdoutError = Mutex<Int32>(0)

    /// Ends haul with `status`; when a line could not be written to standard output, says so on
    /// standard error and ends with 1 instead of a success, as GNU tools do (`ls > /dev/full`).
    static func exit(_ status: Int32) -> Never {
        let code = stdoutError.withLock { $0 }
        if code != 0 {
            error("haul: cannot write standard output: \(String(cString: strerror(code)))")
            Glibc.exit(status == 0 ? 1 : status)
        }
        Glibc.exit(status)
    }

    /// The reader of stdout or stderr has gone: end as a Unix tool does, by SIGPIPE (SIGPIPE is
    /// ignored while haul runs, so that a socket's EPIPE is an error, not death).
    static func readerGone() -> Never {
        signal(SIGPIPE, SIG_DFL)
        var pipeOnly = sigset_t()
        sigemptyset(&pipeOnly)
        sigaddset(&pipeOnly, SIGPIPE)
        pthread_sigmask(SIG_UNBLOCK, &pipeOnly, nil)
        raise(SIGPIPE)
        _exit(128 + SIGPIPE)
    }

    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Color only on a terminal, and never when NO_COLOR is set (https://no-color.org).
    static var useColor: Bool {
        stdoutIsTerminal && !Terminal.isDumb && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    }

    static func bold(_ text: String) -> String { useColor ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
}

/// Formats numbers and times for people.
enum Format {
    static func bytes(_ count: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    /// ISO 8601 in UTC, to the second.
    static func timestamp(_ milliseconds: Int) -> String {
        var time = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&time, &parts)
        // Digits written directly: String(format:) cost a fifth of an export's time.
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let year = parts.tm_year + 1900
        let yearText = year >= 1000 ? "\(year)" : String(repeating: "0", count: 4 - "\(year)".count) + "\(year)"
        return "\(yearText)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// "in 42 s", "in 3 min", "now" — relative to `now`.
    static func relative(_ milliseconds: Int, now: Int) -> String {
        let seconds = (milliseconds - now + 999) / 1000
        if seconds <= 0 { return "now" }
        if seconds < 120 { return "in \(seconds) s" }
        if seconds < 7200 { return "in \(seconds / 60) min" }
        return "in \(seconds / 3600) h"
    }

    /// "4.2 s", "3m05s", "2h10m".
    static func duration(_ seconds: Double) -> String {
        if seconds < 60 { return String(format: "%.1f s", seconds) }
        let whole = Int(seconds)
        if whole < 3600 { return "\(whole / 60)m\(String(format: "%02d", whole % 60))s" }
        return "\(whole / 3600)h\(String(format: "%02d", (whole % 3600) / 60))m"
    }

    static func nowMilliseconds() -> Int { Int(Date().timeIntervalSince1970 * 1000) }
}
