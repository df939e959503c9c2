import CFileSync
import Foundation
import HaulPostgres

/// A throwaway PostgreSQL cluster for tests, so `swift test` alone runs the PostgreSQL tests on
/// a machine that has PostgreSQL's server programs installed (Debian: `postgresql`).
///
/// Guarantees: one cluster per test process, started on first use by `shared()` (thread-safe),
/// in a fresh folder under /tmp, listening on 127.0.0.1 only, on a free port, with trust
/// authentication for the user `haul` and durability off (fsync, synchronous_commit,
/// full_page_writes) for speed; stopped (`pg_ctl -m immediate`) and its folder removed when
/// the test process exits. A cluster left by a test process that was killed is stopped and
/// removed by the next one. When run as root (initdb refuses root) the cluster belongs to the
/// `postgres` user and its programs run through `runuser`. Each test takes its own database
/// from `makeDatabase()`.
public final class PostgresCluster: Sendable {
    /// The TCP port the cluster listens on, on 127.0.0.1.
    public let port: Int
    /// The folder holding the cluster (`data/`, its log and its socket).
    public let directory: String
    /// Seconds `initdb` took, and seconds `pg_ctl start` took (the successful try).
    public let initSeconds: Double
    public let startSeconds: Double

    /// Why PostgreSQL tests cannot run here (no initdb or pg_ctl, or no way to leave root);
    /// nil when they can. Tests skip themselves with this message.
    public static var unavailableReason: String? {
        if case .failure(let reason) = tools { return reason.message }
        return nil
    }

    /// The cluster of this test process, started on first call.
    public static func shared() throws -> PostgresCluster {
        try state.withLock { state in
            if let state { return try state.get() }
            let result = Result { try PostgresCluster.start() }
            state = result
            return try result.get()
        }
    }

    /// The URL of `database` on this cluster.
    public func url(database: String) -> String {
        "postgres://haul@127.0.0.1:\(port)/\(database)"
    }

    /// Creates a fresh, empty database and returns its URL.
    public func makeDatabase() throws -> String {
        let number = Self.databaseCounter.withLock { counter -> Int in
            counter += 1
            return counter
        }
        let name = "haul_test_\(getpid())_\(number)"
        let connection = try PostgresConnection(url: url(database: "postgres"))
        try connection.execute("CREATE DATABASE \(name)")
        return url(database: name)
    }

    // MARK: - Starting and stopping

    private init(port: Int, directory: String, initSeconds: Double, startSeconds: Double) {
        self.port = port
        self.directory = directory
        self.initSeconds = initSeconds
        self.startSeconds = startSeconds
    }

    private static let state = Locked<Result<PostgresCluster, any Error>?>(nil)
    private static let databaseCounter = Locked(0)
    /// The folder of the running cluster, for the exit handler.
    private static let running = Locked<String?>(nil)

    struct Tools: Sendable {
        var initdb: String
        var pgCtl: String
        /// The command prefix that runs a program as the cluster's owner (empty when not root).
        var asOwner: [String]
        /// The owner's uid and gid, when the folder must be handed to it.
        var owner: (uid: uid_t, gid: gid_t)?
    }

    struct Unavailable: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    struct StartError: Error, CustomStringConvertible {
        var description: String
    }

    static let tools: Result<Tools, Unavailable> = findTools()

    private static func findTools() -> Result<Tools, Unavailable> {
        guard let (initdb, pgCtl) = findServerPrograms() else {
            return .failure(Unavailable(message: "PostgreSQL's server programs (initdb, pg_ctl) are not installed; install them (Debian: apt-get install postgresql) to run the PostgreSQL tests"))
        }
        guard geteuid() == 0 else { return .success(Tools(initdb: initdb, pgCtl: pgCtl, asOwner: [], owner: nil)) }
        guard let entry = getpwnam("postgres") else {
            return .failure(Unavailable(message: "running as root, and there is no `postgres` user to run PostgreSQL as (initdb refuses root)"))
        }
        let uid = entry.pointee.pw_uid, gid = entry.pointee.pw_gid
        let places: [String] = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"]
        if let runuser = places.first(where: { access($0, X_OK) == 0 }) {
            return .success(Tools(initdb: initdb, pgCtl: pgCtl, asOwner: [runuser, "-u", "postgres", "--"], owner: (uid, gid)))
        }
        return .failure(Unavailable(message: "running as root, and runuser is missing: cannot run PostgreSQL as the `postgres` user"))
    }

    /// initdb and pg_ctl: from PATH (symbolic links resolved, pg_ctl taken beside initdb when it
    /// is there), else from the newest /usr/lib/postgresql/VERSION/bin.
    private static func findServerPrograms() -> (String, String)? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        let folders = path.split(separator: ":").map(String.init)
        func inPath(_ name: String) -> String? {
            folders.map { $0 + "/" + name }.first { access($0, X_OK) == 0 }
        }
        if let initdb = inPath("initdb") {
            let resolved = realpath(initdb, nil).map { pointer -> String in
                defer { free(pointer) }
                return String(cString: pointer)
            } ?? initdb
            let beside = (resolved as NSString).deletingLastPathComponent + "/pg_ctl"
            if access(beside, X_OK) == 0 { return (resolved, beside) }
            if let pgCtl = inPath("pg_ctl") { return (resolved, pgCtl) }
        }
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap { name in Double(name).map { (version: $0, name: name) } }
            .sorted { $0.version > $1.version }
        for version in versions {
            let bin = "/usr/lib/postgresql/\(version.name)/bin"
            if access(bin + "/initdb", X_OK) == 0, access(bin + "/pg_ctl", X_OK) == 0 { return (bin + "/initdb", bin + "/pg_ctl") }
        }
        return nil
    }

    private static func start() throws -> PostgresCluster {
        let tools = try tools.get()
        removeAbandonedClusters(tools)
        let folder = try TempDirectory(prefix: "haul-pg")
        let directory = folder.path
        try "\(getpid())\n".write(toFile: directory + "/owner.pid", atomically: false, encoding: .utf8)
        if let owner = tools.owner, chown(directory, owner.uid, owner.gid) != 0 {
            throw StartError(description: "cannot hand \(directory) to the postgres user: \(String(cString: strerror(errno)))")
        }
        running.withLock { $0 = directory }
        atexit { PostgresCluster.stopAtExit() }

        let data = directory + "/data"
        var clock = Date()
        let initStatus = run(tools.asOwner + [tools.initdb, "-D", data, "-A", "trust", "-U", "haul", "--no-sync", "-E", "UTF8", "--locale=C"],
                             in: directory, log: directory + "/initdb.log")
        guard initStatus == 0 else {
            throw StartError(description: "initdb failed (status \(initStatus)): \(tail(directory + "/initdb.log"))")
        }
        let initSeconds = Date().timeIntervalSince(clock)

        var failures: [String] = []
        for _ in 0..<5 {
            let port = try freePort()
            let options = "-c port=\(port) -c listen_addresses=127.0.0.1 -k \(directory) -c fsync=off -c synchronous_commit=off"
                + " -c full_page_writes=off -c max_connections=200"
            clock = Date()
            let status = run(tools.asOwner + [tools.pgCtl, "-w", "-t", "60", "-D", data, "-l", directory + "/log", "start", "-o", options],
                             in: directory, log: directory + "/pg_ctl.log")
            if status == 0 {
                let cluster = PostgresCluster(port: port, directory: directory, initSeconds: initSeconds,
                                              startSeconds: Date().timeIntervalSince(clock))
                FileHandle.standardError.write(Data(String(format: "PostgresCluster: initdb %.2f s, start %.2f s, 127.0.0.1:%d, %@\n",
                                                           cluster.initSeconds, cluster.startSeconds, port, directory).utf8))
                return cluster
            }
            failures.append("port \(port): \(tail(directory + "/log"))")
        }
        throw StartError(description: "PostgreSQL did not start: " + failures.joined(separator: "; "))
    }

    /// Called by `atexit`: stops the cluster at once and removes its folder.
    private static func stopAtExit() {
        guard let directory = running.withLock({ $0 }), case .success(let tools) = tools else { return }
        stop(directory: directory, tools: tools)
    }

    private static func stop(directory: String, tools: Tools) {
        if FileManager.default.fileExists(atPath: directory + "/data/postmaster.pid") {
            _ = run(tools.asOwner + [tools.pgCtl, "-D", directory + "/data", "-m", "immediate", "-w", "stop"], in: "/", log: "/dev/null")
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Clusters whose test process no longer runs (it was killed before its exit handler ran).
    private static func removeAbandonedClusters(_ tools: Tools) {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] where name.hasPrefix("haul-pg.") {
            let directory = base + "/" + name
            guard let text = try? String(contentsOfFile: directory + "/owner.pid", encoding: .utf8),
                  let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { stop(directory: directory, tools: tools) }
        }
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard bound else { throw StartError(description: "bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs `arguments` (argv[0] an absolute path) in `folder`, output to `log`; its exit status.
    private static func run(_ arguments: [String], in folder: String, log: String) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of the test process: the server counts inherited descriptors against its
        // own (a test process with a thousand sockets open leaves it none).
        haul_spawn_close_from(&actions, 3)
        // The programs must start in a folder their user may enter: GNU env changes to it first
        // (posix_spawn_file_actions_addchdir_np is not visible to Swift here).
        let command = ["/usr/bin/env", "-C", folder] + arguments
        let argv = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard spawned == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS, which Swift does not import.
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }

    /// The last lines of a log, on one line, for an error message.
    private static func tail(_ path: String) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no log at \(path))"
        return text.split(whereSeparator: \.isNewline).suffix(5).joined(separator: " | ")
    }
}
