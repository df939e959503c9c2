import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTPS server for tests: nginx (Debian's nginx-light: ssl and http2), with a
/// throwaway CA and a server certificate for 127.0.0.1 and localhost made by the `openssl`
/// command, all in a private temp folder.
///
/// - Listens on `127.0.0.1:PORT` (a free port) with TLS and HTTP/2 (ALPN `h2`, HTTP/1.1 too).
/// - Serves `documentRoot` as static files: Range, If-Range, strong ETags, as nginx does.
/// - Writes one access-log line per request, with its protocol (`accessLog()`).
/// - Optionally proxies path prefixes to plain-HTTP upstreams (a `FaultServer`, say), so fault
///   cases can go over TLS: HTTP/1.1 upstream, no buffering, the prefix stripped
///   (`/fault/x` → `UPSTREAM/x`), Location headers passed through untouched.
/// - nginx runs in the foreground as one process (`daemon off; master_process off;`), as the
///   current user (`user` names it when that is root, so nothing runs as `nobody`), with its
///   prefix, pid file, logs and temp paths in the temp folder. Readiness is awaited by
///   connecting to the port. `stop()` (also on deinit) ends nginx, waits for it to exit and
///   removes the temp folder.
///
/// When nginx or openssl is missing, `init` throws `ToolMissing`; a test turns that into a skip,
/// or a failure when `CI=true` (see `ToolMissing.requiredByEnvironment`).
///
/// ```swift
/// let upstream = try FaultServer()
/// let server = try HTTPSServer(proxies: [.init(prefix: "/fault/", upstream: upstream.baseURL)])
/// defer { server.stop() }
/// try server.write("f.bin", data)
/// // trust server.caFile (CurlTransport.Options(caFile:)), fetch server.url("/f.bin")
/// ```
public final class HTTPSServer: Sendable {
    /// A path prefix served by a plain-HTTP upstream.
    public struct Proxy: Sendable {
        /// Starts and ends with `/`, e.g. `/fault/`.
        public var prefix: String
        /// `http://HOST:PORT`; requests go to `UPSTREAM/<path after the prefix>`.
        public var upstream: URL

        public init(prefix: String, upstream: URL) {
            self.prefix = prefix
            self.upstream = upstream
        }
    }

    /// nginx or openssl is not installed.
    public struct ToolMissing: Error, CustomStringConvertible {
        public let tool: String
        public var description: String {
            "\(tool) is not installed (Debian: apt-get install nginx-light openssl); the HTTPS tests need it"
        }

        /// True when the environment says the tool must be there: `CI=true` (then a missing
        /// tool fails the test instead of skipping it).
        public static var requiredByEnvironment: Bool {
            ProcessInfo.processInfo.environment["CI"] == "true"
        }
    }

    /// nginx or openssl failed.
    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    public let host = "127.0.0.1"
    public let port: Int
    /// The throwaway CA's certificate (PEM): trust this file to trust the server.
    public let caFile: String
    /// The folder served at `/`.
    public let documentRoot: String
    /// The private temp folder: certificates, nginx.conf, logs, temp paths.
    public let folder: String

    private let temp: TempDirectory
    private let nginx: RunningProcess
    private let stopped = Mutex(false)

    /// - Parameters:
    ///   - documentRoot: the folder to serve; nil serves `<folder>/www` (see `write`).
    ///   - proxies: path prefixes proxied to plain-HTTP upstreams.
    public init(documentRoot: String? = nil, proxies: [Proxy] = []) throws {
        guard let nginxPath = HaulProcess.tool("nginx")?.path else { throw ToolMissing(tool: "nginx") }
        guard let opensslPath = HaulProcess.tool("openssl")?.path else { throw ToolMissing(tool: "openssl") }
        let temp = try TempDirectory(prefix: "haul-https")
        var started: (RunningProcess, Int)?
        do {
            let tls = try temp.makeDirectory("tls")
            try Self.makeCertificates(openssl: opensslPath, in: tls)
            for name in ["logs", "temp", "www"] { try temp.makeDirectory(name) }
            let root = documentRoot ?? temp.file("www")
            var failures: [String] = []
            // The port is picked free, then handed to nginx: another process may take it in
            // between, so a failed bind is tried again on another port.
            for _ in 0..<3 where started == nil {
                let port = try Self.freePort()
                let config = Self.configuration(folder: temp.path, port: port, root: root, proxies: proxies)
                let configFile = try temp.write("nginx.conf", Data(config.utf8))
                try? FileManager.default.removeItem(atPath: temp.file("logs/error.log"))  // this try's alone
                let process = try Self.startUnmasked(
                    URL(fileURLWithPath: nginxPath),
                    ["-p", temp.path + "/", "-c", configFile, "-e", temp.file("logs/error.log")],
                    currentDirectory: temp.path)
                switch Self.awaitListening(process, port: port, timeout: 10) {
                case .listening:
                    started = (process, port)
                case .exited:
                    let result = process.wait(timeout: 5)
                    let log = (try? String(contentsOfFile: temp.file("logs/error.log"), encoding: .utf8)) ?? ""
                    failures.append("nginx exited (status \(result.status)): \(result.stderrText)\(log)")
                    if !log.contains("Address already in use") && !result.stderrText.contains("Address already in use") {
                        throw StartError(description: failures.joined(separator: "\n"))
                    }
                case .timedOut:
                    kill(process.processIdentifier, SIGKILL)
                    let result = process.wait(timeout: 5)
                    throw StartError(description: "nginx did not listen on 127.0.0.1:\(port) within 10 s: \(result.stderrText)")
                }
            }
            guard let started else { throw StartError(description: failures.joined(separator: "\n")) }
            self.documentRoot = root
            (nginx, port) = started
        } catch {
            temp.remove()
            throw error
        }
        self.temp = temp
        folder = temp.path
        caFile = temp.file("tls/ca.pem")
    }

    deinit {
        stop()
    }

    /// `https://127.0.0.1:PORT` (or `https://localhost:PORT`), no trailing slash.
    public func baseURLString(host: String? = nil) -> String { "https://\(host ?? self.host):\(port)" }

    /// Absolute https URL for `path` (which should start with `/`).
    public func url(_ path: String, host: String? = nil) -> URL {
        URL(string: baseURLString(host: host) + (path.hasPrefix("/") ? path : "/" + path))!
    }

    /// Writes `data` at `name` (a relative path) under `documentRoot` and returns its path.
    @discardableResult
    public func write(_ name: String, _ data: Data) throws -> String {
        let target = documentRoot + "/" + name
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: target))
        return target
    }

    /// The ETag nginx sends for the file at `path`: `"<mtime hex>-<size hex>"`.
    public static func etag(ofFile path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw StartError(description: "stat \(path): \(String(cString: strerror(errno)))")
        }
        return "\"\(String(info.st_mtim.tv_sec, radix: 16))-\(String(info.st_size, radix: 16))\""
    }

    /// The access log, one line per finished request: `c=CONNECTION-NUMBER PROTOCOL STATUS
    /// "REQUEST LINE" range="RANGE" if_range="IF-RANGE" bytes=BODY-BYTES-SENT` (`-` for a
    /// header not sent; requests multiplexed on one HTTP/2 connection share its number).
    public func accessLog() -> [String] {
        let text = (try? String(contentsOfFile: temp.file("logs/access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    /// The protocol (`HTTP/2.0`, `HTTP/1.1`) of an access-log line, its second field.
    public static func protocolOf(logLine line: String) -> String? {
        line.split(separator: " ").dropFirst().first.map(String.init)
    }

    /// The protocol of the request for `target` (path and query, as sent), once nginx logged it.
    public func protocolOfRequest(_ target: String) -> String? {
        waitForAccessLog { $0.contains("\"GET \(target) ") }.flatMap(Self.protocolOf(logLine:))
    }

    /// Waits until some access-log line satisfies `predicate` (nginx writes the line once the
    /// request is finished, which a client may see a moment earlier). Returns that line.
    public func waitForAccessLog(timeout: TimeInterval = 5, where predicate: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            if let line = accessLog().first(where: predicate) { return line }
            if ContinuousClock.now > deadline { return nil }
            usleep(10_000)
        }
    }

    /// nginx's error log (TLS handshake failures are logged at `info`).
    public var errorLog: String {
        (try? String(contentsOfFile: temp.file("logs/error.log"), encoding: .utf8)) ?? ""
    }

    /// Stops nginx (SIGTERM; SIGKILL after `timeout`), waits for it to exit, and removes the temp
    /// folder. Idempotent. Returns whether nginx exited by itself in time.
    @discardableResult
    public func stop(timeout: TimeInterval = 5) -> Bool {
        let first = stopped.withLock { stopped -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return true }
        kill(nginx.processIdentifier, SIGTERM)
        let result = nginx.wait(timeout: timeout)
        temp.remove()
        return !result.timedOut
    }

    // MARK: - Setup

    /// A CA (`ca.pem`, `ca.key`) and a server certificate it signed (`server.pem`, `server.key`)
    /// for IP:127.0.0.1 and DNS:localhost, valid for two days, P-256 keys.
    static func makeCertificates(openssl: String, in folder: String) throws {
        let serverExtensions = """
            subjectAltName = IP:127.0.0.1, DNS:localhost
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid, issuer

            """
        try Data(serverExtensions.utf8).write(to: URL(fileURLWithPath: folder + "/server.ext"))
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let steps: [[String]] = [
            ["req", "-x509"] + key + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=haul test CA \(getpid())-\(UInt32.random(in: 0...UInt32.max))",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-new"] + key + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-set_serial", "0x" + String(UInt64.random(in: 1...UInt64.max >> 1), radix: 16),
             "-days", "2", "-extfile", "server.ext", "-out", "server.pem"],
        ]
        for arguments in steps {
            let result = try HaulProcess.run(URL(fileURLWithPath: openssl), arguments,
                                             environment: HaulProcess.environment(), currentDirectory: folder, timeout: 30)
            guard result.status == 0, !result.timedOut else {
                throw StartError(description: "openssl \(arguments.joined(separator: " ")) failed (status \(result.status)): \(result.stderrText)")
            }
        }
    }

    /// nginx.conf: one server on 127.0.0.1:`port`, TLS and HTTP/2, everything in `folder`.
    static func configuration(folder: String, port: Int, root: String, proxies: [Proxy]) -> String {
        // As root, nginx would run its worker as `nobody`, which cannot enter the 0700 temp
        // folder; name the current user instead (outside root, `user` is ignored with a warning).
        var user = ""
        if geteuid() == 0, let account = getpwuid(geteuid()), let group = getgrgid(getegid()) {
            user = "user \(String(cString: account.pointee.pw_name)) \(String(cString: group.pointee.gr_name));"
        }
        let locations = proxies.map { proxy in
            """
                    location \(proxy.prefix) {
                        proxy_pass \(proxy.upstream.absoluteString.hasSuffix("/") ? proxy.upstream.absoluteString : proxy.upstream.absoluteString + "/");
                        proxy_http_version 1.1;
                        proxy_set_header Connection "";
                        proxy_buffering off;
                        proxy_request_buffering off;
                        proxy_redirect off;
                    }

            """
        }.joined()
        return """
            daemon off;
            master_process off;
            worker_processes 1;
            \(user)
            pid \(folder)/nginx.pid;
            error_log \(folder)/logs/error.log info;
            events { worker_connections 256; }
            http {
                types { }
                default_type application/octet-stream;
                log_format haul 'c=$connection $server_protocol $status "$request" range="$http_range" if_range="$http_if_range" bytes=$body_bytes_sent';
                access_log \(folder)/logs/access.log haul;
                client_body_temp_path \(folder)/temp/body;
                proxy_temp_path \(folder)/temp/proxy;
                fastcgi_temp_path \(folder)/temp/fastcgi;
                uwsgi_temp_path \(folder)/temp/uwsgi;
                scgi_temp_path \(folder)/temp/scgi;
                server {
                    listen 127.0.0.1:\(port) ssl http2;
                    server_name localhost 127.0.0.1;
                    ssl_certificate \(folder)/tls/server.pem;
                    ssl_certificate_key \(folder)/tls/server.key;
                    ssl_protocols TLSv1.2 TLSv1.3;
                    root \(root);
                    location / { }
            \(locations)
                }
            }

            """
    }

    /// A port nothing listens on now (bound to 127.0.0.1:0, then released).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw StartError(description: "bind: \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw StartError(description: "getsockname: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        return address
    }

    /// Whether something accepts connections on 127.0.0.1:`port` now.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// Starts `executable` from a thread whose signal mask is empty. Foundation's `Process`
    /// hands the child the spawning thread's mask, and the threads async code runs on block
    /// nearly every signal, SIGTERM included: nginx started from an async test would never see
    /// `stop()`'s SIGTERM.
    private static func startUnmasked(_ executable: URL, _ arguments: [String], currentDirectory: String) throws -> RunningProcess {
        let outcome = Mutex<Result<RunningProcess, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            var none = sigset_t()
            sigemptyset(&none)
            pthread_sigmask(SIG_SETMASK, &none, nil)
            let started = Result {
                try HaulProcess.start(executable, arguments, environment: HaulProcess.environment(),
                                      currentDirectory: currentDirectory)
            }
            outcome.withLock { $0 = started }
            done.signal()
        }
        thread.name = "HTTPSServer spawn"
        thread.start()
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    private enum Readiness { case listening, exited, timedOut }

    /// Connects to the port until nginx accepts (a loopback connect answers at once: refused or
    /// accepted), nginx exits, or `timeout` passes.
    private static func awaitListening(_ process: RunningProcess, port: Int, timeout: TimeInterval) -> Readiness {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            if !process.process.isRunning { return .exited }
            if accepts(port: port) { return process.process.isRunning ? .listening : .exited }
            if ContinuousClock.now > deadline { return .timedOut }
            usleep(5_000)
        }
    }
}
