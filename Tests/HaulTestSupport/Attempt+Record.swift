import HaulCore

extension Attempt {
    /// "NUMBER STARTED FINISHED STATUS BYTES", -1 for what is not known: an attempt's record in
    /// one comparable line, as the store tests check it.
    public var record: String {
        "\(number) \(startedAt) \(finishedAt ?? -1) \(status ?? -1) \(bytes ?? -1)"
    }

    /// "NUMBER STARTED FINISHED BYTES", "open" for an attempt not ended and "-" for unknown bytes:
    /// the upgrade tests' view of open attempts.
    public var openRecord: String {
        "\(number) \(startedAt) \(finishedAt.map(String.init) ?? "open") \(bytes.map(String.init) ?? "-")"
    }
}
