import HaulCore

/// How `haul export` writes one job: the same fields, in the same order, as a JSON object on
/// one line (`jsonl`) or as a CSV row (`csv`, RFC 4180).
///
/// Guarantees: every record has every field, in `fields` order; a value that is not known is
/// `null` in JSON and an empty field in CSV; URLs and the failure reason have their credentials
/// hidden (`HTTPURL.redact`). A JSON line holds no raw control character or newline (they are
/// escaped); a CSV field holding a comma, a quote, CR or LF is quoted with its quotes doubled,
/// and each row, the header row first, ends with CRLF. Records are written straight into the
/// output's bytes, with no JSON tree or String per record in between.
enum ExportFormat: String, CaseIterable {
    case jsonl
    case csv

    /// The field names: JSON keys, and the CSV header row.
    static let fields = [
        "id", "destination", "url", "final_url", "state", "bytes", "checksum", "file_sha256", "etag", "last_modified",
        "content_type", "last_status", "attempts", "finished_at", "kept", "last_error", "placed_by",
    ]

    /// One field's value.
    enum Value {
        case null
        case int(Int)
        case bool(Bool)
        case string(String)

        static func optional(_ value: String?) -> Value { value.map(Value.string) ?? .null }
        static func optional(_ value: Int?) -> Value { value.map(Value.int) ?? .null }
    }

    /// The values of `job`'s record, in `fields` order.
    static func values(_ job: Job) -> [Value] {
        let metadata = job.placed?.metadata
        return [
            .int(job.id),
            // Where the file is: beside the destination when that held someone else's file.
            .string(job.placed?.path ?? job.destination),
            .string(job.redactedURL),
            .optional(metadata?.finalURL.map(HTTPURL.redact)),
            .string(job.state.rawValue),
            .int(job.receivedBytes),
            .optional(job.checksum),
            .optional(metadata?.sha256),
            .optional(metadata?.etag),
            .optional(metadata?.lastModified),
            .optional(metadata?.contentType),
            .optional(job.lastStatus),
            .int(job.attempts),
            .optional(job.finishedAt.map(Format.timestamp)),
            .bool(job.kept),
            .optional(job.lastError.map(HTTPURL.redact)),
            .optional(job.placedBy),
        ]
    }

    /// What comes before the first record: the CSV header row; nothing for JSON lines.
    var header: String? {
        switch self {
        case .jsonl: return nil
        case .csv: return Self.fields.joined(separator: ",") + "\r\n"
        }
    }

    /// Appends `job`'s record, with its line end, to `out`.
    func append(_ job: Job, to out: inout [UInt8]) {
        let values = Self.values(job)
        switch self {
        case .jsonl:
            out.append(UInt8(ascii: "{"))
            for (index, value) in values.enumerated() {
                out.append(contentsOf: Self.jsonKeys[index])
                switch value {
                case .null: out.append(contentsOf: "null".utf8)
                case .int(let number): out.append(contentsOf: String(number).utf8)
                case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
                case .string(let text): Self.appendJSONString(text, to: &out)
                }
            }
            out.append(contentsOf: "}\n".utf8)
        case .csv:
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                switch value {
                case .null: break
                case .int(let number): out.append(contentsOf: String(number).utf8)
                case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
                case .string(let text): Self.appendCSVField(text, to: &out)
                }
            }
            out.append(contentsOf: "\r\n".utf8)
        }
    }

    /// `"id":`, `,"destination":`, … ready to copy.
    private static let jsonKeys: [[UInt8]] = fields.enumerated().map { index, name in
        var key: [UInt8] = index == 0 ? [] : [UInt8(ascii: ",")]
        appendJSONString(name, to: &key)
        key.append(UInt8(ascii: ":"))
        return key
    }

    /// A JSON string, escaped as `JSON.writeString` escapes it (quote, backslash, and every
    /// control character below U+0020). UTF-8 is escaped byte by byte: every byte of a multibyte
    /// character is 0x80 or above, so none is mistaken for one of these.
    static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            out.append(UInt8(ascii: "\""))
            if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(contentsOf: bytes)
            } else {
                for byte in bytes {
                    switch byte {
                    case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
                    case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
                    case UInt8(ascii: "\n"): out.append(contentsOf: "\\n".utf8)
                    case UInt8(ascii: "\r"): out.append(contentsOf: "\\r".utf8)
                    case UInt8(ascii: "\t"): out.append(contentsOf: "\\t".utf8)
                    case 0..<0x20:
                        out.append(contentsOf: "\\u00".utf8)
                        out.append(hexDigits[Int(byte >> 4)])
                        out.append(hexDigits[Int(byte & 0xF)])
                    default: out.append(byte)
                    }
                }
            }
            out.append(UInt8(ascii: "\""))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A CSV field (RFC 4180): as it is, or quoted with its quotes doubled when it holds a comma,
    /// a quote, CR or LF.
    static func appendCSVField(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            let special: (UInt8) -> Bool = {
                $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r")
            }
            guard bytes.contains(where: special) else { return out.append(contentsOf: bytes) }
            out.append(UInt8(ascii: "\""))
            for byte in bytes {
                if byte == UInt8(ascii: "\"") { out.append(byte) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        }
    }
}
