extension PostgresConnection {
    /// `url` without its password, for messages: `postgres://user:pass@host:5432/db?password=x&sslmode=require`
    /// becomes `postgres://user@host:5432/db?sslmode=require`. Works on `postgres://` and
    /// `postgresql://` URIs and on `key=value` connection strings (`password=…` is dropped).
    ///
    /// Guarantees: pure; everything else in the URL is kept as written.
    public static func redacted(_ url: String) -> String {
        guard let parts = URIParts(url) else { return redactedConnectionString(url) }
        var result = parts.scheme
        if let user = parts.user, !user.isEmpty { result += user + "@" }
        result += parts.hostAndPath
        let kept = parts.query.filter { !secretParameters.contains(parameterName($0)) }
        if !kept.isEmpty { result += "?" + kept.joined(separator: "&") }
        return result
    }

    /// The passwords written in `url` (in the userinfo or as a `password` parameter), as written
    /// and percent-decoded.
    static func passwords(in url: String) -> [String] {
        var found: [String] = []
        if let parts = URIParts(url) {
            if let password = parts.password { found.append(password) }
            for parameter in parts.query where secretParameters.contains(parameterName(parameter)) {
                found.append(String(parameter.drop { $0 != "=" }.dropFirst()))
            }
        } else {
            found = connectionStringPasswords(url)
        }
        return found + found.compactMap { $0.removingPercentEncoding }.filter { !found.contains($0) }
    }

    /// libpq's parameters that hold a secret: the password, and the one of the client key.
    public static let secretParameters: Set<String> = ["password", "sslpassword"]

    private static func parameterName(_ parameter: Substring) -> String {
        String(parameter.prefix { $0 != "=" }).removingPercentEncoding ?? String(parameter.prefix { $0 != "=" })
    }

    /// A URI split where libpq splits it. The userinfo ends at the last `@` before the path (so a
    /// stray `@` in a password is still treated as part of it).
    private struct URIParts {
        var scheme: String
        var user: String?
        var password: String?
        var hostAndPath: String
        var query: [Substring]

        init?(_ url: String) {
            guard let scheme = ["postgresql://", "postgres://"].first(where: { url.lowercased().hasPrefix($0) }) else { return nil }
            self.scheme = String(url.prefix(scheme.count))
            let rest = url.dropFirst(scheme.count)
            // The authority ends at the first "/"; with no path, at the first "?" after any "@".
            // An "@" after a "/" (before the query) ends it too: libpq would not take what comes
            // before as a password (`postgres://u:pa/ss@host/db`), but it is one mistyped, and
            // never shown.
            let firstAt = rest.firstIndex(of: "@")
            let beforeQuery = rest[..<(rest.firstIndex(of: "?") ?? rest.endIndex)]
            let authorityEnd = beforeQuery.lastIndex(of: "@").flatMap { at in
                    rest[..<at].contains("/") ? rest[at...].firstIndex(of: "/") ?? beforeQuery.endIndex : nil
                }
                ?? rest.firstIndex(of: "/")
                ?? rest[(firstAt ?? rest.startIndex)...].firstIndex(of: "?")
                ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            var remainder = rest[authorityEnd...]
            if let at = authority.lastIndex(of: "@") {
                let userinfo = authority[..<at]
                if let colon = userinfo.firstIndex(of: ":") {
                    user = String(userinfo[..<colon])
                    password = String(userinfo[userinfo.index(after: colon)...])
                } else {
                    user = String(userinfo)
                }
                hostAndPath = String(authority[authority.index(after: at)...])
            } else {
                hostAndPath = String(authority)
            }
            if let question = remainder.firstIndex(of: "?") {
                query = remainder[remainder.index(after: question)...].split(separator: "&", omittingEmptySubsequences: true)
                remainder = remainder[..<question]
            } else {
                query = []
            }
            hostAndPath += remainder
        }
    }

    /// A `key=value` connection string without its `password` (values may be single-quoted,
    /// with `\'` and `\\` escapes, as libpq reads them).
    private static func redactedConnectionString(_ text: String) -> String {
        connectionStringPairs(text).filter { !secretParameters.contains($0.key) }.map(\.raw).joined(separator: " ")
    }

    private static func connectionStringPasswords(_ text: String) -> [String] {
        connectionStringPairs(text).filter { secretParameters.contains($0.key) }.map(\.value)
    }

    private static func connectionStringPairs(_ text: String) -> [(key: String, value: String, raw: String)] {
        var pairs: [(key: String, value: String, raw: String)] = []
        var characters = Array(text)
        characters.append(" ")
        var index = 0
        func skipSpaces() { while index < characters.count, characters[index].isWhitespace { index += 1 } }
        while true {
            skipSpaces()
            guard index < characters.count else { break }
            let start = index
            var key = ""
            while index < characters.count, characters[index] != "=", !characters[index].isWhitespace {
                key.append(characters[index])
                index += 1
            }
            skipSpaces()
            var value = ""
            if index < characters.count, characters[index] == "=" {
                index += 1
                skipSpaces()
                if index < characters.count, characters[index] == "'" {
                    index += 1
                    while index < characters.count, characters[index] != "'" {
                        if characters[index] == "\\", index + 1 < characters.count { index += 1 }
                        value.append(characters[index])
                        index += 1
                    }
                    index += 1
                } else {
                    while index < characters.count, !characters[index].isWhitespace {
                        if characters[index] == "\\", index + 1 < characters.count { index += 1 }
                        value.append(characters[index])
                        index += 1
                    }
                }
            }
            pairs.append((key: key, value: value, raw: String(characters[start..<min(index, characters.count - 1)])))
        }
        return pairs
    }
}
