import Foundation

/// What haul needs to know of a terminal: its size, and how wide text is on it.
///
/// Guarantees: `size` is asked of the terminal each time (so a resize is seen at the next
/// redraw) and falls back to `$COLUMNS`/`$LINES`, then 80×24; `fit` never returns text wider
/// than it was given, counting East Asian wide characters as two columns and escape sequences
/// as none, and never splits a character or an escape sequence; `printable` leaves no control
/// character (a file name cannot move the cursor).
enum Terminal {
    struct Size: Equatable {
        var columns: Int
        var rows: Int
    }

    static func size(of descriptor: Int32) -> Size {
        var window = winsize()
        if ioctl(descriptor, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0 {
            return Size(columns: Int(window.ws_col), rows: max(Int(window.ws_row), 1))
        }
        let environment = ProcessInfo.processInfo.environment
        return Size(columns: environment["COLUMNS"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 80,
                    rows: environment["LINES"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 24)
    }

    /// Columns `text` takes on a terminal (its SGR escape sequences, such as bold, take none).
    static func width(_ text: String) -> Int {
        var columns = 0
        var inEscape = false
        for scalar in text.unicodeScalars {
            if inEscape {
                if scalar.properties.isAlphabetic && scalar != "[" { inEscape = false }
            } else if scalar == "\u{1B}" {
                inEscape = true
            } else {
                columns += width(of: scalar)
            }
        }
        return columns
    }

    /// `text` cut to at most `columns` columns, ending in "…" when cut (and, when it holds
    /// escape sequences, in a reset, so that a cut bold part does not run on).
    static func fit(_ text: String, _ columns: Int) -> String {
        guard width(text) > columns else { return text }
        guard columns > 0 else { return "" }
        var result = ""
        var used = 0
        var inEscape = false
        var styled = false
        for character in text {
            if inEscape || character == "\u{1B}" {
                result.append(character)
                styled = true
                inEscape = character == "\u{1B}" || !(character.isLetter && character != "[")
                continue
            }
            let columnsOfIt = character.unicodeScalars.reduce(0) { $0 + width(of: $1) }
            if used + columnsOfIt > columns - 1 { break }
            result.append(character)
            used += columnsOfIt
        }
        return result + "…" + (styled ? "\u{1B}[0m" : "")
    }

    /// `TERM=dumb` (an editor's shell, a plain console): no cursor movement, no colour; a run
    /// prints plain lines there.
    static var isDumb: Bool { ProcessInfo.processInfo.environment["TERM"] == "dumb" }

    /// `text` with control characters (newlines, escapes, tabs) shown as "?".
    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isControl($0) ? "?" : $0 }))
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value)
    }

    private static func width(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value < 0x300 { return 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if value == 0x200D || (0xFE00...0xFE0F).contains(value) { return 0 }
        let wide: [ClosedRange<UInt32>] = [
            0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD,
        ]
        return wide.contains { $0.contains(value) } ? 2 : 1
    }
}
