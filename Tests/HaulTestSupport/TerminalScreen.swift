/// A small terminal emulator for tests of live displays: enough of a VT100 to replay what a
/// program wrote to a pseudo-terminal and see what a person would see.
///
/// It keeps every row ever written (scrollback and screen as one list), wraps at the right
/// margin as xterm does (a character written past the last column moves to the next row, and
/// `wraps` counts those), and re-flows soft-wrapped rows on `resize`, as most terminals now do
/// (VTE, kitty, iTerm2, tmux). Understood: printable characters (one column each), `\r`, `\n`,
/// backspace, and the CSI sequences `A` (up), `B` (down), `C`, `D`, `G`, `J` (erase below) and
/// `K` (erase line); any other CSI sequence is skipped.
public struct TerminalScreen: Sendable {
    struct Row: Sendable {
        var cells: [Character] = []
        /// The row's text goes on in the next row (it was wrapped at the margin, not ended).
        var continues = false
    }

    public private(set) var columns: Int
    private var rows: [Row] = [Row()]
    private var row = 0
    private var column = 0
    /// Characters that went past the right margin (a line wider than the terminal).
    public private(set) var wraps = 0

    public init(columns: Int) {
        self.columns = columns
    }

    /// Every row's text, right-trimmed, soft-wrapped rows kept apart.
    public var lines: [String] {
        rows.map { String($0.cells).replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression) }
    }

    public var text: String { lines.joined(separator: "\n") }

    public mutating func feed(_ text: String) {
        var scalars = Array(text)[...]
        while let character = scalars.popFirst() {
            switch character {
            case "\r": column = 0
            case "\n", "\r\n":
                if character == "\r\n" { column = 0 }
                newRow(continuing: false)
            case "\u{8}": column = max(0, min(column, columns) - 1)
            case "\u{1B}":
                guard scalars.first == "[" else { scalars = scalars.dropFirst(); continue }
                scalars = scalars.dropFirst()
                var parameters = ""
                while let next = scalars.first, next.isNumber || next == ";" || next == "?" {
                    parameters.append(next)
                    scalars = scalars.dropFirst()
                }
                guard let final = scalars.popFirst() else { return }
                csi(final, Int(parameters.split(separator: ";").first ?? "") ?? 0)
            default:
                if column >= columns {
                    rows[row].continues = true
                    wraps += 1
                    newRow(continuing: true)
                    column = 0
                }
                while rows[row].cells.count <= column { rows[row].cells.append(" ") }
                rows[row].cells[column] = character
                column += 1
            }
        }
    }

    /// The terminal is made `newColumns` wide: soft-wrapped rows are joined and wrapped again.
    public mutating func resize(columns newColumns: Int) {
        var logical: [[Character]] = []
        var current: [Character] = []
        var cursor = (line: 0, offset: 0)
        for (index, entry) in rows.enumerated() {
            if index == row { cursor = (logical.count, current.count + column) }
            current += entry.cells
            if !entry.continues {
                logical.append(current)
                current = []
            }
        }
        if !current.isEmpty || logical.isEmpty { logical.append(current) }
        columns = newColumns
        rows = []
        for (index, line) in logical.enumerated() {
            let start = rows.count
            var chunks = stride(from: 0, to: max(line.count, 1), by: newColumns).map {
                Row(cells: Array(line[$0..<min($0 + newColumns, line.count)]), continues: true)
            }
            chunks[chunks.count - 1].continues = false
            rows += chunks
            if index == cursor.line {
                let offset = cursor.offset
                if offset > 0 && offset % newColumns == 0 && offset >= line.count {
                    (row, column) = (start + offset / newColumns - 1, newColumns)
                } else {
                    (row, column) = (start + offset / newColumns, offset % newColumns)
                }
            }
        }
        while rows.count <= row { rows.append(Row()) }
    }

    private mutating func newRow(continuing: Bool) {
        row += 1
        if row == rows.count { rows.append(Row()) }
        if !continuing { column = min(column, columns) }
    }

    private mutating func csi(_ final: Character, _ count: Int) {
        let n = max(count, 1)
        switch final {
        case "A": row = max(0, row - n); column = min(column, columns - 1)
        case "B": for _ in 0..<n { newRow(continuing: false) }
        case "C": column = min(columns - 1, column + n)
        case "D": column = max(0, min(column, columns) - n)
        case "G": column = min(columns - 1, n - 1)
        case "K":
            if count == 0 { rows[row].cells = Array(rows[row].cells.prefix(column)); rows[row].continues = false }
            else if count == 2 { rows[row].cells = []; rows[row].continues = false }
        case "J":
            if count == 0 {
                rows[row].cells = Array(rows[row].cells.prefix(column))
                rows[row].continues = false
                rows.removeSubrange((row + 1)...)
            }
        default: break
        }
    }
}
