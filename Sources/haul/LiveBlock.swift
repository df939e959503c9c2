/// The lines a terminal display keeps redrawn below the output that scrolls: the text that
/// erases them, draws them again, or prints a line above them.
///
/// Guarantees: every line drawn is cut to one column less than the terminal's width, so no
/// line wraps and the cursor never waits at the right margin; erasing counts the rows the
/// drawn lines take at the width the terminal has now, so after the terminal narrowed (and
/// re-flowed the old lines onto more rows) nothing is left behind. The cursor ends at the end
/// of the last line drawn.
struct LiveBlock {
    private(set) var lines: [String] = []

    var isShown: Bool { !lines.isEmpty }

    /// Removes the block; the cursor goes to where its first line began.
    mutating func erase(columns: Int) -> String {
        guard !lines.isEmpty else { return "" }
        let columns = max(columns, 1)
        let rows = lines.reduce(0) { $0 + max(1, (Terminal.width($1) + columns - 1) / columns) }
        lines = []
        return "\r" + (rows > 1 ? "\u{1B}[\(rows - 1)A" : "") + "\u{1B}[J"
    }

    /// Replaces the block with `newLines`.
    mutating func draw(_ newLines: [String], columns: Int) -> String {
        let erased = erase(columns: columns)
        lines = newLines.map { Terminal.fit($0, columns - 1) }
        return erased + lines.joined(separator: "\n")
    }

    /// Prints `text` (which may be any width: it scrolls away) above the block, and the block
    /// again below it.
    mutating func print(_ text: String, columns: Int) -> String {
        let kept = lines
        let erased = erase(columns: columns)
        return erased + text + "\n" + (kept.isEmpty ? "" : draw(kept, columns: columns))
    }
}
