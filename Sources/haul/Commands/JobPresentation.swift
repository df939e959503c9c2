import HaulCore

/// How jobs and attempts are shown, as text and as JSON. URLs are always redacted.
enum JobPresentation {
    static func json(_ job: Job) -> JSON {
        .object([
            ("id", .int(job.id)),
            ("url", .string(job.redactedURL)),
            ("host", .string(job.host)),
            ("destination", .string(job.destination)),
            ("state", .string(job.state.rawValue)),
            ("attempts", .int(job.attempts)),
            ("max_attempts", .int(job.maxAttempts)),
            ("next_attempt_at", job.nextAttemptAt > 0 ? .string(Format.timestamp(job.nextAttemptAt)) : .null),
            ("last_status", .optional(job.lastStatus)),
            ("last_error", .optional(job.lastError.map(HTTPURL.redact))),
            ("error_kind", .optional(job.errorKind.map(HTTPURL.redact))),
            ("expected_bytes", .optional(job.expectedBytes)),
            ("received_bytes", .int(job.receivedBytes)),
            ("checksum", .optional(job.checksum)),
            // Kept for scripts written when sha256 was the only checksum: its hex, or null.
            ("sha256", .optional(job.checksum.flatMap(Checksum.init(stored:)).flatMap { $0.algorithm == .sha256 ? $0.hex : nil })),
            ("if_exists", .string(job.ifExists.rawValue)),
            ("kept", .bool(job.kept)),
            ("placed_at", .optional(job.placed?.path)),
            ("placed_by", .optional(job.placedBy)),
            ("final_url", .optional(job.placed?.metadata.finalURL.map(HTTPURL.redact))),
            ("content_type", .optional(job.placed?.metadata.contentType)),
            ("etag", .optional(job.placed?.metadata.etag)),
            ("last_modified", .optional(job.placed?.metadata.lastModified)),
            ("file_sha256", .optional(job.placed?.metadata.sha256)),
            ("created_at", .string(Format.timestamp(job.createdAt))),
            ("updated_at", .string(Format.timestamp(job.updatedAt))),
            ("finished_at", job.finishedAt.map { .string(Format.timestamp($0)) } ?? .null),
        ])
    }

    static func json(_ attempt: Attempt) -> JSON {
        .object([
            ("number", .int(attempt.number)),
            ("started_at", .string(Format.timestamp(attempt.startedAt))),
            ("finished_at", attempt.finishedAt.map { .string(Format.timestamp($0)) } ?? .null),
            ("status", .optional(attempt.status)),
            ("error", .optional(attempt.error.map(HTTPURL.redact))),
            ("bytes", .optional(attempt.bytes)),
        ])
    }

    /// One line for `haul list`.
    static func line(_ job: Job) -> String {
        let size = job.expectedBytes.map(Format.bytes) ?? "?"
        var text = "\(job.id)\t\(job.state.rawValue)\t\(job.attempts)/\(job.maxAttempts)\t\(size)\t\(job.redactedURL) → \(job.placed?.path ?? job.destination)"
        if job.kept { text += "\t(\(Job.keptNote))" }
        if job.state == .failed || job.state == .queued, let error = job.lastError { text += "\t(\(HTTPURL.redact(error)))" }
        return text
    }

    /// The block printed by `haul show`.
    static func details(_ job: Job, attempts: [Attempt], profile: RequestProfile? = nil, now: Int) -> String {
        var lines = [
            "job \(job.id)",
            "  url:          \(job.redactedURL)",
            "  destination:  \(job.destination)",
            "  state:        \(job.state.rawValue)\(job.kept ? " (\(Job.keptNote), not downloaded)" : "")",
            "  attempts:     \(job.attempts) of \(job.maxAttempts)",
            "  bytes:        \(job.receivedBytes) of \(job.expectedBytes.map(String.init) ?? "unknown")",
        ]
        if job.state == .queued && job.nextAttemptAt > now {
            lines.append("  next attempt: \(Format.timestamp(job.nextAttemptAt)) (\(Format.relative(job.nextAttemptAt, now: now)))")
        }
        if let status = job.lastStatus { lines.append("  last status:  \(status)") }
        if let error = job.lastError { lines.append("  last error:   \(HTTPURL.redact(error))") }
        if let checksum = job.checksum { lines.append("  checksum:     \(checksum)") }
        if job.ifExists != .skip { lines.append("  if exists:    \(job.ifExists.rawValue)") }
        if let path = job.placed?.path { lines.append("  placed at:    \(path) (the destination held another file)") }
        if let worker = job.placedBy { lines.append("  placed by:    \(worker)") }
        if let metadata = job.placed?.metadata {
            if let url = metadata.finalURL, url != job.url { lines.append("  final url:    \(HTTPURL.redact(url))") }
            if let type = metadata.contentType { lines.append("  type:         \(type)") }
            if let etag = metadata.etag { lines.append("  etag:         \(etag)") }
            if let date = metadata.lastModified { lines.append("  modified:     \(date)") }
            if let sha = metadata.sha256 { lines.append("  file sha256:  \(sha)") }
        }
        if let profile { lines.append("  request:      \(profile)") }  // names only, never values
        if let finished = job.finishedAt { lines.append("  finished:     \(Format.timestamp(finished))") }
        var lastCounted = 0
        for attempt in attempts {
            if attempt.wasCounted {
                if attempt.number <= lastCounted { lines.append("  (attempts counted again from 1: queued again by retry, refresh or verify --fix)") }
                lastCounted = attempt.number
            }
            var text = attempt.wasCounted ? "  attempt \(attempt.number): " : "  not counted:  "
            text += Format.timestamp(attempt.startedAt)
            if let status = attempt.status { text += " status \(status)" }
            if let bytes = attempt.bytes { text += ", \(bytes) bytes" }
            if let error = attempt.error { text += ": \(HTTPURL.redact(error))" }
            if attempt.finishedAt == nil { text += " (in progress)" }
            lines.append(text)
        }
        // What a server sent (a type, an ETag, an error's text) may hold escapes: shown as "?".
        return lines.map(Terminal.printable).joined(separator: "\n")
    }
}
