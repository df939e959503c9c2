import Foundation

/// Where the CLI writes: stdout for results, stderr for diagnostics.
enum Console {
    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Color only on a terminal, and never when NO_COLOR is set (https://no-color.org).
    static var useColor: Bool {
        stdoutIsTerminal && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
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
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec)
    }

    /// "in 42 s", "in 3 min", "now" — relative to `now`.
    static func relative(_ milliseconds: Int, now: Int) -> String {
        let seconds = (milliseconds - now + 999) / 1000
        if seconds <= 0 { return "now" }
        if seconds < 120 { return "in \(seconds) s" }
        if seconds < 7200 { return "in \(seconds / 60) min" }
        return "in \(seconds / 3600) h"
    }

    static func nowMilliseconds() -> Int { Int(Date().timeIntervalSince1970 * 1000) }
}
