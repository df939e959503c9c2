/// Recent rates of a run (or of one transfer), from samples of its running totals.
///
/// Guarantees: a rate covers at most the last `window` seconds, so it follows a change of
/// speed within that time; there is no rate until the samples span `minimumSpan` (the first
/// instants of a run say nothing of its speed); memory is bounded by the sampling interval.
struct ProgressMeter {
    static let window = 10.0
    static let minimumSpan = 1.0

    private var samples: [(at: Double, bytes: Int64, files: Int)] = []

    mutating func record(at time: Double, bytes: Int64, files: Int = 0) {
        if let last = samples.last, time - last.at < 0.05 { samples.removeLast() }
        samples.append((time, bytes, files))
        if let cut = samples.firstIndex(where: { time - $0.at <= Self.window }), cut > 0 {
            samples.removeFirst(cut)
        }
    }

    /// Bytes per second over the window.
    var byteRate: Double? {
        guard let first = samples.first, let last = samples.last, last.at - first.at >= Self.minimumSpan else { return nil }
        return Double(max(0, last.bytes - first.bytes)) / (last.at - first.at)
    }

    /// Files per second over the window.
    var fileRate: Double? {
        guard let first = samples.first, let last = samples.last, last.at - first.at >= Self.minimumSpan else { return nil }
        return Double(max(0, last.files - first.files)) / (last.at - first.at)
    }
}

/// How long the rest of a run should take, and what the guess rests on.
///
/// Guarantees: from bytes when every unfinished job's size is known; from bytes with the
/// unknown sizes taken as the mean of the files done so far (`guessedBytes`) when only some
/// are; from files when no size is known (or nothing is done yet to guess from); none (never "0 s") when the rate it needs is zero or not
/// yet known.
struct ETA: Equatable {
    enum Basis: Equatable { case bytes, guessedBytes, files }
    var seconds: Double
    var basis: Basis

    static func estimate(pendingJobs: Int, pendingBytes: Int64, unknownSize: Int, doneFiles: Int, doneBytes: Int64,
                         byteRate: Double?, fileRate: Double?) -> ETA? {
        guard pendingJobs > 0 else { return nil }
        let unknown = min(unknownSize, pendingJobs)
        if let byteRate, byteRate > 0 {
            if unknown == 0 { return ETA(seconds: Double(pendingBytes) / byteRate, basis: .bytes) }
            if unknown < pendingJobs, doneFiles > 0 {
                let mean = Double(doneBytes) / Double(doneFiles)
                return ETA(seconds: (Double(pendingBytes) + Double(unknown) * mean) / byteRate, basis: .guessedBytes)
            }
        }
        if let fileRate, fileRate > 0 { return ETA(seconds: Double(pendingJobs) / fileRate, basis: .files) }
        return nil
    }

    /// "ETA 3m20s by bytes", "ETA ~3m20s by bytes", "ETA 3m20s by files", or "ETA ?".
    static func text(_ eta: ETA?) -> String {
        guard let eta else { return "ETA ?" }
        switch eta.basis {
        case .bytes: return "ETA \(Format.duration(eta.seconds)) by bytes"
        case .guessedBytes: return "ETA ~\(Format.duration(eta.seconds)) by bytes"
        case .files: return "ETA \(Format.duration(eta.seconds)) by files"
        }
    }
}
