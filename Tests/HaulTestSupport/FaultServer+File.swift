import Foundation

extension FaultServer {
    /// Serves `data` like a well-behaved static file server.
    ///
    /// - `Range: bytes=N-`, `bytes=N-M`, `bytes=-S` → 206 with `Content-Range: bytes N-M/TOTAL`
    ///   (M clamped to TOTAL-1); N >= TOTAL → 416 with `Content-Range: bytes */TOTAL`.
    ///   Malformed or multi-range headers are ignored (full 200), as RFC 9110 allows.
    /// - `If-Range`: the Range is honoured only if the value strongly matches `etag` (a weak tag never
    ///   matches) or equals `lastModified` exactly; otherwise the full 200 is served.
    /// - `honorRange: false` always serves the full 200 and omits `Accept-Ranges`.
    /// - Always sends `ETag` / `Last-Modified` when given. HEAD gets the same headers, no body.
    public static func file(
        _ data: Data,
        etag: String? = nil,
        lastModified: String? = nil,
        honorRange: Bool = true,
        contentType: String? = "application/octet-stream",
        headers extraHeaders: Headers = [:]
    ) -> Handler {
        return { request in
            fileResponse(
                data, request: request, etag: etag, lastModified: lastModified,
                honorRange: honorRange, contentType: contentType, extraHeaders: extraHeaders)
        }
    }

    /// `file(...)` that ignores `Range` entirely (always 200 with the whole body).
    public static func fileIgnoringRange(
        _ data: Data, etag: String? = nil, lastModified: String? = nil,
        contentType: String? = "application/octet-stream"
    ) -> Handler {
        file(data, etag: etag, lastModified: lastModified, honorRange: false, contentType: contentType)
    }

    /// The response `file(...)` would give for `request` — use from a custom handler to serve the file
    /// and then add a fault, e.g. `FaultServer.fileResponse(data, request: r).truncated(afterBytes: 10)`.
    public static func fileResponse(
        _ data: Data,
        request: Request,
        etag: String? = nil,
        lastModified: String? = nil,
        honorRange: Bool = true,
        contentType: String? = "application/octet-stream",
        extraHeaders: Headers = [:]
    ) -> Response {
        var headers: Headers = [:]
        if let contentType { headers.add("Content-Type", contentType) }
        if let etag { headers.add("ETag", etag) }
        if let lastModified { headers.add("Last-Modified", lastModified) }
        if honorRange { headers.add("Accept-Ranges", "bytes") }
        for field in extraHeaders { headers.add(field.name, field.value) }

        let total = data.count
        guard honorRange, let rangeValue = request.headers["Range"],
              let spec = parseSingleByteRange(rangeValue)
        else {
            return Response(status: 200, headers: headers, body: data)
        }
        if let ifRange = request.headers["If-Range"],
           !ifRangeMatches(ifRange, etag: etag, lastModified: lastModified) {
            return Response(status: 200, headers: headers, body: data)
        }

        let first: Int
        let last: Int
        switch spec {
        case .from(let start, let end):
            guard start < total else {
                headers.add("Content-Range", "bytes */\(total)")
                return Response(status: 416, headers: headers)
            }
            first = start
            last = min(end ?? (total - 1), total - 1)
        case .suffix(let length):
            guard length > 0, total > 0 else {
                headers.add("Content-Range", "bytes */\(total)")
                return Response(status: 416, headers: headers)
            }
            first = max(0, total - length)
            last = total - 1
        }
        headers.add("Content-Range", "bytes \(first)-\(last)/\(total)")
        let slice = data.subdata(in: (data.startIndex + first)..<(data.startIndex + last + 1))
        return Response(status: 206, headers: headers, body: slice)
    }

    enum ByteRangeSpec: Equatable {
        case from(Int, Int?)  // N-  or N-M
        case suffix(Int)      // -S
    }

    /// Parses `bytes=N-`, `bytes=N-M`, `bytes=-S`. `nil` for anything else (including multiple ranges
    /// and M < N), meaning "ignore the Range header".
    static func parseSingleByteRange(_ value: String) -> ByteRangeSpec? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard let eq = trimmed.firstIndex(of: "="),
              trimmed[..<eq].trimmingCharacters(in: .whitespaces).lowercased() == "bytes"
        else { return nil }
        let set = trimmed[trimmed.index(after: eq)...].trimmingCharacters(in: .whitespaces)
        guard !set.contains(","), let dash = set.firstIndex(of: "-") else { return nil }
        let lhs = set[..<dash].trimmingCharacters(in: .whitespaces)
        let rhs = set[set.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        func number(_ s: String) -> Int? {
            guard !s.isEmpty, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int(s)
        }
        if lhs.isEmpty {
            guard let suffix = number(rhs) else { return nil }
            return .suffix(suffix)
        }
        guard let start = number(lhs) else { return nil }
        if rhs.isEmpty { return .from(start, nil) }
        guard let end = number(rhs), end >= start else { return nil }
        return .from(start, end)
    }

    /// RFC 9110 §13.1.5: an entity-tag must match strongly (weak tags never match); a date must be an
    /// exact match of Last-Modified.
    static func ifRangeMatches(_ value: String, etag: String?, lastModified: String?) -> Bool {
        let v = value.trimmingCharacters(in: .whitespaces)
        if v.hasPrefix("\"") || v.hasPrefix("W/") {
            guard let etag, !v.hasPrefix("W/"), !etag.hasPrefix("W/") else { return false }
            return v == etag
        }
        guard let lastModified else { return false }
        return v == lastModified
    }
}
