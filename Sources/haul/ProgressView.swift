import HaulCore

/// What the live display of a run shows: one line for the batch and one for each of the
/// biggest transfers in flight.
///
/// Guarantees: no line is wider than the terminal less one column; the batch line keeps its
/// most telling parts as the terminal narrows (the counts, then the rate, then the ETA) and
/// drops the others whole; transfer lines are shown only for files of at least `bigFile`
/// bytes, at most `biggest` of them, and only when the terminal has rows to spare for them;
/// file names are shown without control characters.
struct ProgressView {
    static let biggest = 3
    static let bigFile: Int64 = 1 << 20

    private var meter = ProgressMeter()
    private var transferMeters: [Int: ProgressMeter] = [:]

    mutating func lines(_ stats: EngineStats, at time: Double, size: Terminal.Size) -> [String] {
        meter.record(at: time, bytes: stats.bytesThisRun, files: stats.done + stats.failed)
        var lines = [batchLine(stats, columns: size.columns)]
        let big = stats.transfers
            .filter { max($0.expectedTotal ?? 0, $0.bytesOnDisk) >= Self.bigFile }
            .sorted { ($0.expectedTotal ?? $0.bytesOnDisk, $1.jobID) > ($1.expectedTotal ?? $1.bytesOnDisk, $0.jobID) }
            .prefix(min(Self.biggest, max(0, size.rows - 3)))
        var meters: [Int: ProgressMeter] = [:]
        for transfer in big {
            var transferMeter = transferMeters[transfer.jobID] ?? ProgressMeter()
            transferMeter.record(at: time, bytes: transfer.bytesOnDisk)
            meters[transfer.jobID] = transferMeter
            lines.append(Self.transferLine(transfer, rate: transferMeter.byteRate, columns: size.columns))
        }
        transferMeters = meters
        return lines
    }

    private func batchLine(_ stats: EngineStats, columns: Int) -> String {
        let counts = stats.queueCounts
        let total = counts.isEmpty ? stats.done + stats.failed + stats.active : counts.values.reduce(0, +)
        let finished = counts.isEmpty ? stats.done + stats.failed
            : (counts[.done] ?? 0) + (counts[.failed] ?? 0) + (counts[.cancelled] ?? 0)
        let pending = (counts[.queued] ?? 0) + (counts[.running] ?? 0)
        let eta = ETA.estimate(pendingJobs: pending, pendingBytes: stats.pendingBytes, unknownSize: stats.pendingUnknownSize,
                               doneFiles: stats.done, doneBytes: stats.doneBytes,
                               byteRate: meter.byteRate, fileRate: meter.fileRate)
        // (priority, text), in the order shown; the lowest priorities go first when room is short.
        var parts: [(priority: Int, text: String)] = [
            (0, "[\(finished)/\(total)]"),
            (3, Format.bytes(Int(stats.bytesThisRun))),
        ]
        if let rate = meter.byteRate { parts.append((1, "\(Format.bytes(Int(rate)))/s")) }
        if pending > 0 { parts.append((2, ETA.text(eta))) }
        parts.append((4, "\(stats.active) active"))
        if stats.failed > 0 { parts.append((5, "\(stats.failed) failed")) }
        if stats.waitingForRetry > 0 { parts.append((6, "\(stats.waitingForRetry) waiting to retry")) }
        return Self.fit(parts, columns: columns - 1)
    }

    /// The parts that fit in `columns`, most important first, shown in their own order.
    static func fit(_ parts: [(priority: Int, text: String)], columns: Int) -> String {
        var kept = Set<Int>()
        var used = 0
        for index in parts.indices.sorted(by: { parts[$0].priority < parts[$1].priority }) {
            let width = Terminal.width(parts[index].text) + (kept.isEmpty ? 0 : 2)
            if used + width > columns && !kept.isEmpty { continue }
            kept.insert(index)
            used += width
        }
        let shown = parts.indices.filter(kept.contains).map { parts[$0].text }
        guard let first = shown.first else { return "" }
        return Terminal.fit(([first + (shown.count > 1 ? " " + shown[1] : "")] + shown.dropFirst(2)).joined(separator: ", "), columns)
    }

    /// "  NAME  [#####-----]  42% 421.0 MiB of 1.0 GiB, 35.1 MiB/s", losing the bar, then the
    /// rate, then the byte counts as the terminal narrows; the name is cut last.
    static func transferLine(_ transfer: TransferStats, rate: Double?, columns: Int) -> String {
        let name = Terminal.printable(transfer.destination.split(separator: "/").last.map(String.init) ?? transfer.destination)
        let fraction = transfer.expectedTotal.map { $0 > 0 ? min(1, Double(transfer.bytesOnDisk) / Double($0)) : 1 }
        let percent = fraction.map { "\(Int($0 * 100))%" }
        let bytes = Format.bytes(Int(transfer.bytesOnDisk)) + (transfer.expectedTotal.map { " of " + Format.bytes(Int($0)) } ?? "")
        let speed = rate.map { Format.bytes(Int($0)) + "/s" }
        let variants: [[String?]] = [[percent, bytes, speed], [percent, bytes], [percent ?? bytes]]
        let budget = columns - 1
        let nameWidth = Terminal.width(name)
        for (index, variant) in variants.enumerated() {
            let figures = variant.compactMap { $0 }
            guard !figures.isEmpty else { continue }
            let text = figures.count > 1 ? figures[0] + " " + figures.dropFirst().joined(separator: ", ") : figures[0]
            let room = budget - 4 - Terminal.width(text)
            let last = index == variants.count - 1
            guard room >= min(nameWidth, 12) || last else { continue }
            var line = "  " + Terminal.fit(name, max(room, 1)) + "  "
            if let fraction, index == 0, room - nameWidth >= 14 {
                let width = min(30, room - nameWidth - 4)
                let filled = Int(fraction * Double(width))
                line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]  "
            }
            return Terminal.fit(line + text, budget)
        }
        return Terminal.fit("  " + name, budget)
    }
}
