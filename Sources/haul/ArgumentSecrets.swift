import Foundation
import HaulPostgres

/// Hides the secrets of haul's own command line from `ps` and /proc/PID/cmdline, which any user
/// of the machine may read: the password of `-u USER:PASSWORD`, the value of a credential header
/// (`-H 'Authorization: …'`, Cookie, Proxy-Authorization), and the password of any URL with
/// `user:password@` (a job's URL, a proxy's, a PostgreSQL queue's), and a PostgreSQL URL's
/// `password=` and `sslpassword=` parameters. As curl does for `-u`.
///
/// Guarantees: each secret byte of the process's argument memory becomes `*` (the lengths stay,
/// so nothing else moves); what haul itself parses is the copy Swift made at start-up
/// (`CommandLine.arguments`), which keeps the secrets. The window between exec and this call,
/// a few milliseconds, is not covered: as with curl, a secret that must never be seen goes in
/// a file (`--netrc-file`, `-i` with the URLs) or the environment (PGPASSWORD).
enum ArgumentSecrets {
    /// What an option's value may hide.
    private enum Secret {
        /// `USER:PASSWORD` (`-u`).
        case user
        /// A header line (`-H`).
        case header
        /// A proxy, which may have no scheme (`user:pw@host:port`, `-x`).
        case proxy

        init?(option: String) {
            switch option {
            case "-u", "--user": self = .user
            case "-H", "--header": self = .header
            case "-x", "--proxy": self = .proxy
            default: return nil
            }
        }

        func mask(_ value: UnsafeMutablePointer<CChar>) {
            switch self {
            case .user: ArgumentSecrets.maskPassword(ofUser: value)
            case .header: ArgumentSecrets.maskCredentialHeader(value)
            case .proxy: ArgumentSecrets.maskURLPassword(value, schemeOptional: true)
            }
        }
    }

    static func hide() {
        let count = Int(CommandLine.argc)
        let argv = CommandLine.unsafeArgv
        var index = 1
        while index < count {
            guard let argument = argv[index] else { index += 1; continue }
            let text = String(cString: argument)
            let next = index + 1 < count ? argv[index + 1] : nil
            if let secret = Secret(option: text), let next {
                secret.mask(next)
                index += 2
                continue
            }
            if !text.hasPrefix("--"), text.hasPrefix("-"), text.utf8.count > 2, let (secret, offset) = bundledSecret(in: text) {
                // Short options together (-ualice:pw, -kHCookie: c=1, -xuser:pw@host, -ku with
                // the value next): the value is the rest of the argument, or the next one.
                let attached = offset < strlen(argument)
                if let value = attached ? argument + offset : next { secret.mask(value) }
                index += attached ? 1 : 2
                continue
            }
            if let equals = text.firstIndex(of: "="), text.hasPrefix("--"), let secret = Secret(option: String(text[..<equals])) {
                secret.mask(argument + text.utf8.distance(from: text.startIndex, to: equals) + 1)
            }
            maskURLPassword(argument, schemeOptional: false)
            maskPostgresParameters(argument)
            index += 1
        }
    }

    /// Short options that take no value, over every command: letters that may come before
    /// another in one argument.
    private static let flagLetters = Set(Commands.all.flatMap { $0.spec.allOptions }.filter { $0.value == nil }
        .flatMap(\.names).filter { $0.count == 2 }.compactMap(\.last))

    /// In `-kqu…`: the first option after the flags when its value may hold a secret (`-u`,
    /// `-H`, `-x`), with the offset of its value in the argument.
    private static func bundledSecret(in text: String) -> (Secret, Int)? {
        for (offset, letter) in text.enumerated().dropFirst() {
            if flagLetters.contains(letter) { continue }
            return Secret(option: "-\(letter)").map { ($0, offset + 1) }
        }
        return nil
    }

    /// `user:password` → `user:********`.
    private static func maskPassword(ofUser value: UnsafeMutablePointer<CChar>) {
        let length = strlen(value)
        guard let colon = (0..<length).first(where: { value[$0] == UInt8(ascii: ":") }) else { return }
        mask(value, from: colon + 1, to: length)
    }

    /// `Authorization: Basic …` → `Authorization: *****…`; other headers stay.
    private static func maskCredentialHeader(_ value: UnsafeMutablePointer<CChar>) {
        let text = String(cString: value)
        // No colon (`Authorization Bearer …`, refused later): the value starts after the name.
        guard let colon = text.firstIndex(of: ":") ?? text.firstIndex(where: \.isWhitespace) else { return }
        let name = text[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        guard ["authorization", "proxy-authorization", "cookie"].contains(name) else { return }
        let start = text.utf8.distance(from: text.startIndex, to: colon) + 1
        mask(value, from: start, to: strlen(value))
    }

    /// The password of the userinfo of a URL (`scheme://user:password@host…`), or of an
    /// authority without a scheme when `schemeOptional`: the authority ends at the first '/', '?'
    /// or '#', and its last '@' ends the userinfo, as URL parsers read them.
    private static func maskURLPassword(_ value: UnsafeMutablePointer<CChar>, schemeOptional: Bool) {
        let length = strlen(value)
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: length)
        var start = 0
        if let scheme = find(Array("://".utf8), in: bytes) {
            start = scheme + 3
        } else if !schemeOptional {
            return
        }
        let end = (start..<length).first(where: { [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[$0]) }) ?? length
        guard let at = (start..<end).last(where: { bytes[$0] == UInt8(ascii: "@") }),
              let colon = (start..<at).first(where: { bytes[$0] == UInt8(ascii: ":") }) else { return }
        mask(value, from: colon + 1, to: at)
    }

    /// In a PostgreSQL URL (`postgres://…?password=…&sslpassword=…`, alone or as `--db=…`): the
    /// values of its secret parameters, each up to the next '&' (libpq reads no fragment: a '#'
    /// is part of the value).
    private static func maskPostgresParameters(_ value: UnsafeMutablePointer<CChar>) {
        let length = strlen(value)
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: length)
        guard let scheme = find(Array("://".utf8), in: bytes) else { return }
        let before = String(decoding: bytes[..<scheme], as: UTF8.self).lowercased()
        guard before.hasSuffix("postgres") || before.hasSuffix("postgresql"),
              let question = (scheme..<length).first(where: { bytes[$0] == UInt8(ascii: "?") }) else { return }
        var start = question + 1
        while start < length {
            let stop = (start..<length).first(where: { bytes[$0] == UInt8(ascii: "&") }) ?? length
            if let equals = (start..<stop).first(where: { bytes[$0] == UInt8(ascii: "=") }),
               case let name = String(decoding: bytes[start..<equals], as: UTF8.self),
               PostgresConnection.secretParameters.contains((name.removingPercentEncoding ?? name).lowercased()) {
                mask(value, from: equals + 1, to: stop)
            }
            start = stop + 1
        }
    }

    private static func find(_ needle: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        return (0...(bytes.count - needle.count)).first { start in
            needle.indices.allSatisfy { bytes[start + $0] == needle[$0] }
        }
    }

    private static func mask(_ value: UnsafeMutablePointer<CChar>, from start: Int, to end: Int) {
        for offset in start..<max(start, end) { value[offset] = CChar(UInt8(ascii: "*")) }
    }
}
