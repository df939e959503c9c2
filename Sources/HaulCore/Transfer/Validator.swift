import Foundation

/// A strong validator of a representation, safe to send in `If-Range` when resuming: the server
/// then sends the remaining bytes only if the representation is byte-for-byte the one we started.
///
/// Guarantees (RFC 9110 §8.8, §13.1.5): `strong(etag:lastModified:date:)` never returns a weak
/// validator.
/// - `.etag` holds a well-formed strong entity-tag, quotes included (`"xyzzy"`), never `W/`.
/// - `.lastModified` is returned only when there is no usable ETag, the response carried a `Date`,
///   and `Date` is at least one second after `Last-Modified`, so the resource cannot have changed
///   twice within the second the date names. It holds the date re-written as IMF-fixdate, the
///   only form a sender may generate.
/// - A weak ETag (`W/"…"`) yields `nil`, never the date: a client that has an entity-tag must not
///   put a date in `If-Range`. A malformed ETag (not an entity-tag at all) is ignored.
public enum Validator: Equatable, Sendable {
    case etag(String)
    case lastModified(String)

    public static func strong(etag: String?, lastModified: String?, date: String?) -> Validator? {
        if let etag {
            switch EntityTag(etag) {
            case .strong(let tag): return .etag(tag)
            case .weak: return nil
            case .malformed: break
            }
        }
        guard let lastModified, let date,
              let modified = HTTPDate.parse(lastModified),
              let generated = HTTPDate.parse(date),
              generated.timeIntervalSince(modified) >= 1
        else { return nil }
        return .lastModified(HTTPDate.format(modified))
    }

    /// Whether a partial answer (206) with these `ETag` and `Last-Modified` values shows that it
    /// continues the representation this validator names: the same strong entity-tag, or (for a
    /// date) a `Last-Modified` naming the same instant. A 206 must carry the ETag a 200 would
    /// (RFC 9110 §15.3.7), and may leave the date out; one without the validator kept may come
    /// from a server that ignores `If-Range`, and its bytes may belong to another version.
    public func isContinued(etag: String?, lastModified: String?) -> Bool {
        switch self {
        case .etag(let tag):
            guard let etag, case .strong(let sent) = EntityTag(etag) else { return false }
            return sent == tag
        case .lastModified(let date):
            guard let lastModified, let sent = HTTPDate.parse(lastModified), let kept = HTTPDate.parse(date) else { return false }
            return sent == kept
        }
    }

    /// The value to send as `If-Range`.
    public var headerValue: String {
        switch self {
        case .etag(let tag): return tag
        case .lastModified(let date): return date
        }
    }

    /// How an `ETag` header value reads under `entity-tag = [ weak ] opaque-tag`.
    private enum EntityTag {
        case strong(String)
        case weak
        case malformed

        init(_ value: String) {
            var bytes = Substring(value).utf8
            while let byte = bytes.first, byte == 0x20 || byte == 0x09 { bytes.removeFirst() }
            while let byte = bytes.last, byte == 0x20 || byte == 0x09 { bytes.removeLast() }
            // `W/` is case-sensitive in the grammar; treat `w/` as weak too, to be safe.
            if bytes.count >= 2, bytes.first == UInt8(ascii: "W") || bytes.first == UInt8(ascii: "w"),
               bytes.dropFirst().first == UInt8(ascii: "/") {
                self = Self.isOpaqueTag(bytes.dropFirst(2)) ? .weak : .malformed
            } else if Self.isOpaqueTag(bytes) {
                self = .strong(String(Substring(bytes)))
            } else {
                self = .malformed
            }
        }

        /// `DQUOTE *etagc DQUOTE`, etagc = %x21 / %x23-7E / obs-text.
        private static func isOpaqueTag(_ bytes: Substring.UTF8View) -> Bool {
            guard bytes.count >= 2, bytes.first == 0x22, bytes.last == 0x22 else { return false }
            return bytes.dropFirst().dropLast().allSatisfy { $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) }
        }
    }
}
