/// What the user asked every request of one `add` to carry: headers (`-H`, and `-u` as an
/// `Authorization: Basic` header), a User-Agent (`-A`), credentials from a `.netrc` file.
///
/// Guarantees: a plain value, stored once per distinct set and shared by the jobs of that add;
/// `description` never shows a header's value (values may hold secrets: show names only);
/// header names are unique, case-insensitively.
public struct RequestProfile: Sendable, Equatable, CustomStringConvertible {
    /// Where credentials may come from, besides the headers.
    public enum Netrc: Sendable, Equatable {
        /// `~/.netrc` (`--netrc`).
        case home
        /// `--netrc-file FILE`.
        case file(String)
    }

    /// Header names and values, in the order given.
    public var headers: [(name: String, value: String)]
    public var userAgent: String?
    public var netrc: Netrc?

    public init(headers: [(name: String, value: String)] = [], userAgent: String? = nil, netrc: Netrc? = nil) {
        self.headers = headers
        self.userAgent = userAgent
        self.netrc = netrc
    }

    public var isEmpty: Bool { headers.isEmpty && userAgent == nil && netrc == nil }

    /// True when the profile may hold a secret (any header, or netrc credentials).
    public var mayHoldSecrets: Bool { !headers.isEmpty || netrc != nil }

    public static func == (a: RequestProfile, b: RequestProfile) -> Bool {
        a.headers.map { [$0.name, $0.value] } == b.headers.map { [$0.name, $0.value] }
            && a.userAgent == b.userAgent && a.netrc == b.netrc
    }

    /// Names only, never values: "headers X-Token, Authorization; user agent …; netrc ~/.netrc".
    public var description: String {
        var parts: [String] = []
        if !headers.isEmpty { parts.append("headers \(headers.map(\.name).joined(separator: ", ")) (values hidden)") }
        if let userAgent { parts.append("user agent \(userAgent)") }
        switch netrc {
        case .home?: parts.append("credentials from ~/.netrc")
        case .file(let path)?: parts.append("credentials from \(path)")
        case nil: break
        }
        return parts.isEmpty ? "defaults" : parts.joined(separator: "; ")
    }

    // MARK: Storage form (see Migrations/0003_request_profiles.sql)

    /// How a store keeps the headers: "Name: value" lines, each ending in "\n".
    public var storedHeaders: String { headers.map { "\($0.name): \($0.value)\n" }.joined() }

    /// How a store keeps the netrc choice: nil none, "" ~/.netrc, else the file's path.
    public var storedNetrc: String? {
        switch netrc {
        case .home?: return ""
        case .file(let path)?: return path
        case nil: return nil
        }
    }

    public init(storedHeaders: String, userAgent: String?, storedNetrc: String?) {
        headers = storedHeaders.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), String(line[line.index(after: colon)...].dropFirst()))
        }
        self.userAgent = userAgent
        netrc = storedNetrc.map { $0.isEmpty ? .home : .file($0) }
    }
}
