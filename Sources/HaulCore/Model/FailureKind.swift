import Foundation

/// The kind of a failure reason: its fixed text, with what varies from job to job (paths, URLs,
/// digests, validators, byte counts, attempt counts) taken out, so that failures can be grouped
/// (`status`, the run's summary). The reason itself, with its detail, stays with the job.
///
/// Guarantees: pure; two reasons that differ only in such details have the same kind; a kind is
/// its own kind (applying it again changes nothing); a reason with no such detail is its own
/// kind.
public enum FailureKind {
    public static func of(_ reason: String) -> String {
        var text = reason
        for (pattern, replacement) in rules {
            text = pattern.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: replacement)
        }
        return text
    }

    private static let rules: [(NSRegularExpression, String)] = [
        (#"^(gave up after \d+ attempts?: )+"#, ""),
        // "host unreachable: … (3 attempts in a row to reach h.example:443 failed over 12 s)":
        // one kind for every host (a list over many dead hosts made one per host).
        (#"\(\d+ attempts?( in a row)? to reach [^\s()]+ failed"#, "(N attempts to reach HOST failed"),
        (#"[a-z][a-z0-9+.-]*://[^\s,)]+"#, "URL"),
        (#"(?<![\w.])/[^\s:,)'"]*"#, "PATH"),
        (#"\b[0-9a-f]{16,}\b"#, "HEX"),
        (#""[^"]*""#, "\"…\""),
        (#"\b\d+( of \d+)? bytes\b"#, "N bytes"),
        (#"\b\d+(\.\d+)? s\b"#, "N s"),
    ].map { (try! NSRegularExpression(pattern: $0.0), $0.1) }
}
