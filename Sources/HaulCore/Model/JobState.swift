/// Where a job stands. `done`, `failed` and `cancelled` are final until the user retries.
public enum JobState: String, CaseIterable, Sendable, Codable {
    case queued, running, done, failed, cancelled
}
