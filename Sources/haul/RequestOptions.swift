import Foundation
import HaulCore

/// The options that shape requests, named as curl names them: those stored with the jobs an
/// `add` queues (-H, -A, -u, --netrc), and those of one run (--proxy, --cacert, -k, rates…).
enum RequestOptions {
    static let jobOptions: [CommandSpec.Option] = [
        .init(names: ["-H", "--header"], value: "'NAME: VALUE'", help: "Send this header with every request of these jobs (repeatable).",
              repeatable: true),
        .init(names: ["-A", "--user-agent"], value: "TEXT", help: "The User-Agent of these jobs' requests (default haul/\(HaulVersion.string))."),
        .init(names: ["-u", "--user"], value: "USER:PASSWORD", help: "Basic authentication for these jobs (sent to their own origin only)."),
        .init(names: ["--netrc"], value: nil, help: "Take credentials for each host from ~/.netrc."),
        .init(names: ["--netrc-file"], value: "FILE", help: "Take credentials for each host from FILE."),
    ]

    static let connectionOptions: [CommandSpec.Option] = [
        .init(names: ["-x", "--proxy"], value: "URL", help: "Use this proxy (http://, https://, socks5://, socks5h://)."),
        .init(names: ["--noproxy"], value: "HOSTS", help: "Reach these hosts (comma-separated, * for all) without the proxy."),
        .init(names: ["--cacert"], value: "FILE", help: "Trust the CA certificates in FILE (PEM) instead of the system's."),
        .init(names: ["--capath"], value: "DIR", help: "Trust the CA certificates in DIR (hashed, as c_rehash makes)."),
        .init(names: ["-k", "--insecure"], value: nil, help: "Do not verify servers' certificates."),
        .init(names: ["--limit-rate"], value: "RATE", help: "At most RATE bytes a second over all transfers (k, M, G suffixes)."),
        .init(names: ["--per-host-rate"], value: "RATE", help: "At most RATE bytes a second to each host."),
        .init(names: ["--http1.1"], value: nil, help: "Never use HTTP/2."),
    ]

    /// Headers haul sets itself, which a job may not replace.
    static let reservedHeaders: Set<String> = ["range", "if-range", "accept-encoding", "content-length", "transfer-encoding",
                                               "connection", "te", "upgrade", "host"]

    /// The request profile the job options ask for (nil: none given).
    static func profile(_ arguments: ParsedArguments, spec: CommandSpec) throws -> RequestProfile? {
        var profile = RequestProfile()
        var seen: Set<String> = []
        for raw in arguments.values["--header"] ?? [] {
            guard let colon = raw.firstIndex(of: ":") else {
                // Its first word only: the rest may be the value, a secret (`Authorization Bearer …`).
                let name = raw.split(whereSeparator: \.isWhitespace).first.map(String.init) ?? ""
                throw UsageError(message: "'-H' takes 'NAME: VALUE', and the header \(quoted(name + (name == raw ? "" : " …"))) has no colon", spec: spec)
            }
            let name = raw[..<colon].trimmingCharacters(in: .whitespaces)
            let value = raw[raw.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw UsageError(message: "'-H': \(quoted(name)) is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)", spec: spec)
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw UsageError(message: "'-H \(name)': a header value cannot hold a line break or NUL", spec: spec)
            }
            let key = name.lowercased()
            guard !reservedHeaders.contains(key) else {
                throw UsageError(message: "'-H \(name)': haul sets \(name) itself (ranges to resume, bytes as sent); leave it out", spec: spec)
            }
            guard seen.insert(key).inserted else {
                throw UsageError(message: "'-H \(name)' given twice: give each header once", spec: spec)
            }
            if key == "user-agent" {
                profile.userAgent = value
            } else {
                profile.headers.append((name, value))
            }
        }
        if let agent = arguments.value("--user-agent") {
            guard profile.userAgent == nil else { throw UsageError(message: "give the User-Agent once: -A or -H 'User-Agent: …'", spec: spec) }
            guard !agent.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw UsageError(message: "'-A': a User-Agent cannot hold a line break or NUL", spec: spec)
            }
            profile.userAgent = agent
        }
        if let user = arguments.value("--user") {
            guard user.contains(":") else {
                throw UsageError(message: "'-u' takes USER:PASSWORD (haul runs unattended, so it cannot ask for the password)", spec: spec)
            }
            guard !seen.contains("authorization") else {
                throw UsageError(message: "give credentials once: -u or -H 'Authorization: …'", spec: spec)
            }
            guard !user.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw UsageError(message: "'-u': credentials cannot hold a line break or NUL", spec: spec)
            }
            profile.headers.append(("Authorization", "Basic " + Data(user.utf8).base64EncodedString()))
        }
        if arguments.flag("--netrc") && arguments.value("--netrc-file") != nil {
            throw UsageError(message: "give --netrc or --netrc-file, not both", spec: spec)
        }
        if arguments.flag("--netrc") {
            let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
            guard access(home + "/.netrc", R_OK) == 0 else {
                throw CommandFailure(message: "--netrc: cannot read \(home)/.netrc: \(String(cString: strerror(errno)))")
            }
            profile.netrc = .home
        }
        if let file = arguments.value("--netrc-file") {
            guard access(file, R_OK) == 0 else {
                throw CommandFailure(message: "--netrc-file: cannot read \(file): \(String(cString: strerror(errno)))")
            }
            // Stored as an absolute path: a later `haul run` may start in another folder.
            profile.netrc = .file(URL(fileURLWithPath: file).standardizedFileURL.path)
        }
        return profile.isEmpty ? nil : profile
    }

    /// A --proxy value as an error may show it: its user-info hidden even when it is no URL
    /// (`user:password@host:port`, a password holding '/' or '#').
    static func redactedProxy(_ proxy: String) -> String {
        HTTPURL.hidingUpToLastAt(HTTPURL.redact(proxy)[...])
    }

    /// The connection options of a run.
    static func connection(_ arguments: ParsedArguments, spec: CommandSpec) throws -> ConnectionOptions {
        var options = ConnectionOptions()
        if let proxy = arguments.value("--proxy") {
            // A space or a control character is no part of a URL (Foundation lets a space in the
            // user-info pass; libcurl then refuses it, quoting the password).
            guard !proxy.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }),
                  let url = URL(string: proxy), let scheme = url.scheme?.lowercased(), url.host != nil else {
                throw UsageError(message: "'--proxy' takes a URL such as http://proxy.example:3128, not \(quoted(redactedProxy(proxy)))", spec: spec)
            }
            guard ConnectionOptions.proxySchemes.contains(scheme) else {
                throw UsageError(message: "'--proxy': haul speaks to http, https, socks5 and socks5h proxies, not \(scheme)", spec: spec)
            }
            options.proxy = proxy
        }
        options.noProxy = arguments.value("--noproxy")
        if let file = arguments.value("--cacert") {
            guard access(file, R_OK) == 0 else {
                throw CommandFailure(message: "--cacert: cannot read \(file): \(String(cString: strerror(errno)))")
            }
            options.caFile = file
        }
        if let folder = arguments.value("--capath") {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
                throw CommandFailure(message: "--capath: \(folder) is not a folder")
            }
            options.caPath = folder
        }
        options.insecure = arguments.flag("--insecure")
        options.http11Only = arguments.flag("--http1.1")
        options.limitRate = try rate(arguments, "--limit-rate", spec: spec)
        options.perHostRate = try rate(arguments, "--per-host-rate", spec: spec)
        return options
    }

    private static func rate(_ arguments: ParsedArguments, _ name: String, spec: CommandSpec) throws -> Int64? {
        guard let text = arguments.value(name) else { return nil }
        guard let rate = RateLimiter.parseRate(text) else {
            throw UsageError(message: "'\(name)' takes bytes a second, such as 500k, 2M or 1.5G, not \(quoted(text))", spec: spec)
        }
        return rate
    }

    /// RFC 9110 tchar.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static func quoted(_ text: String) -> String { "'\(AddCommand.printable(text))'" }
}
