import Foundation

/// Hides the secrets of haul's own command line from `ps` and /proc/PID/cmdline, which any user
/// of the machine may read: the password of `-u USER:PASSWORD`, the value of a credential header
/// (`-H 'Authorization: …'`, Cookie, Proxy-Authorization), and the password of any URL with
/// `user:password@` (a job's URL, a proxy's, a PostgreSQL queue's). As curl does for `-u`.
///
/// Guarantees: each secret byte of the process's argument memory becomes `*` (the lengths stay,
/// so nothing else moves); what haul itself parses is the copy Swift made at start-up
/// (`CommandLine.arguments`), which keeps the secrets. The window between exec and this call,
/// a few milliseconds, is not covered: as with curl, a secret that must never be seen goes in
/// a file (`--netrc-file`, `-i` with the URLs) or the environment (PGPASSWORD).
enum ArgumentSecrets {
    /// Options whose next argument is `USER:PASSWORD`.
    private static let userOptions: Set<String> = ["-u", "--user"]
    /// Options whose next argument is a header line.
    private static let headerOptions: Set<String> = ["-H", "--header"]
    /// Options whose next argument is a proxy, which may have no scheme (`user:pw@host:port`).
    private static let proxyOptions: Set<String> = ["-x", "--proxy"]

    static func hide() {
        let count = Int(CommandLine.argc)
        let argv = CommandLine.unsafeArgv
        var index = 1
        while index < count {
            guard let argument = argv[index] else { index += 1; continue }
            let text = String(cString: argument)
            let next = index + 1 < count ? argv[index + 1] : nil
            if userOptions.contains(text), let next {
                maskPassword(ofUser: next)
                index += 2
                continue
            }
            if headerOptions.contains(text), let next {
                maskCredentialHeader(next)
                index += 2
                continue
            }
            if proxyOptions.contains(text), let next {
                maskURLPassword(next, schemeOptional: true)
                index += 2
                continue
            }
            if !text.hasPrefix("--"), text.hasPrefix("-"), text.utf8.count > 2, let (letter, offset) = secretLetter(in: text) {
                // Short options together (-ualice:pw, -kHCookie: c=1, -xuser:pw@host, -ku with
                // the value next): the value is the rest of the argument, or the next one.
                let value: UnsafeMutablePointer<CChar>? = offset < strlen(argument) ? argument + offset : next
                if let value {
                    switch letter {
                    case "u": maskPassword(ofUser: value)
                    case "H": maskCredentialHeader(value)
                    default: maskURLPassword(value, schemeOptional: true)
                    }
                }
                index += offset < strlen(argument) ? 1 : 2
                continue
            }
            if let equals = text.firstIndex(of: "="), text.hasPrefix("--") {
                let name = String(text[..<equals])
                let offset = text.utf8.distance(from: text.startIndex, to: equals) + 1
                let value = argument + offset
                if userOptions.contains(name) { maskPassword(ofUser: value) }
                if headerOptions.contains(name) { maskCredentialHeader(value) }
                if proxyOptions.contains(name) { maskURLPassword(value, schemeOptional: true) }
            }
            maskURLPassword(argument, schemeOptional: false)
            index += 1
        }
    }

    /// Short options that take no value: letters that may come before another in one argument.
    private static let flagLetters: Set<Character> = ["k", "q", "h"]

    /// In `-kqu…`: the first letter after the flags when it is `u`, `H` or `x` (whose value may
    /// hold a secret), with the offset of its value in the argument.
    private static func secretLetter(in text: String) -> (Character, Int)? {
        for (offset, letter) in text.enumerated().dropFirst() {
            if flagLetters.contains(letter) { continue }
            return ["u", "H", "x"].contains(letter) ? (letter, offset + 1) : nil
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
        guard let colon = text.firstIndex(of: ":") else { return }
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
