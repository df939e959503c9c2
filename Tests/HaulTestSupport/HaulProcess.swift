import Foundation
import Synchronization

/// What a finished child process left behind.
public struct ProcessResult: Sendable {
    /// The exit status, or the number of the signal that ended the process (see `signal`).
    public let status: Int32
    /// The signal that ended the process; nil when it exited.
    public let signal: Int32?
    public let stdout: Data
    public let stderr: Data
    /// True when the process had to be killed because it ran past its time limit.
    public let timedOut: Bool
    /// Wall-clock seconds from launch to exit.
    public let seconds: Double

    public var signalled: Bool { signal != nil }

    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
    /// stderr split into lines at newline bytes, without empty ones. (Split as bytes: as
    /// Characters, a "\r\n" pair is one character and would not split.)
    public var stderrLines: [String] { Self.lines(stderr) }
    public var stdoutLines: [String] { Self.lines(stdout) }

    static func lines(_ data: Data) -> [String] {
        data.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Runs child processes for the tests (the one process runner), and finds the built `haul`
/// binary and the tools they use.
public enum HaulProcess {
    /// Where a child's standard output or error goes.
    public enum Output {
        /// Collected into the `ProcessResult` (and `waitForOutput`).
        case capture
        /// A handle the caller holds (e.g. a pipe's end it has closed, or a terminal); not collected.
        case handle(FileHandle)
        /// A pipe the caller reads itself; not collected.
        case pipe(Pipe)
    }

    /// How to feed a child's standard input.
    public enum Input: Sendable {
        case none
        case data(Data)
        case file(String)
    }

    /// The built `haul` executable.
    ///
    /// SwiftPM puts executables in the products directory, where the tests run from too. On
    /// Linux the test bundle is the executable `<products>/<package>PackageTests.xctest`, and
    /// `Bundle(for:).bundleURL` is the products directory itself (checked by a test); on macOS
    /// it is the `.xctest` bundle inside the products directory, so its parent. Falls back to
    /// `.build/debug/haul` under the package root, found by walking up from `filePath`.
    /// Returns nil when none of these holds an executable.
    public static func haulExecutable(testBundle: Bundle, filePath: String = #filePath) -> URL? {
        candidates(testBundle: testBundle, filePath: filePath).first { isExecutableFile($0.path) }
    }

    /// Every place `haulExecutable` looks, in order (for error messages).
    public static func candidates(testBundle: Bundle, filePath: String = #filePath) -> [URL] {
        var places: [URL] = []
        let bundle = testBundle.bundleURL
        places.append(bundle.appendingPathComponent("haul"))
        places.append(bundle.deletingLastPathComponent().appendingPathComponent("haul"))
        if let executable = Bundle.main.executableURL {
            places.append(executable.deletingLastPathComponent().appendingPathComponent("haul"))
        }
        if let root = packageRoot(filePath: filePath) {
            places.append(root.appendingPathComponent(".build/debug/haul"))
        }
        return places
    }

    /// The nearest folder above `filePath` that holds a Package.swift.
    public static func packageRoot(filePath: String = #filePath) -> URL? {
        var folder = URL(fileURLWithPath: filePath).deletingLastPathComponent()
        while folder.path != "/" {
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent("Package.swift").path) { return folder }
            folder = folder.deletingLastPathComponent()
        }
        return nil
    }

    /// The executable `name` in PATH, or in the folders a user's PATH often lacks (sbin); nil
    /// when there is none.
    public static func tool(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let folders = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"]
        return folders.map { URL(fileURLWithPath: $0 + "/" + name) }.first { isExecutableFile($0.path) }
    }

    static func isExecutableFile(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
            && FileManager.default.isExecutableFile(atPath: path)
    }

    /// The environment children get: this process's, without `HAUL_DB` (so a developer's own
    /// setting never leaks into a test), with `NO_COLOR` set, plus `extra`.
    public static func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_DB"] = nil
        environment["NO_COLOR"] = "1"
        for (key, value) in extra { environment[key] = value }
        return environment
    }

    /// Writing to a child that stopped reading must fail with EPIPE, not kill the test process.
    private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// Runs `executable` to completion (or until `timeout`, when it is killed) and collects its
    /// output. Output is drained while the child runs, so a chatty child never blocks on a full pipe.
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                           currentDirectory: String? = nil, input: Input = .none,
                           timeout: TimeInterval = 60) throws -> ProcessResult {
        let child = try start(executable, arguments, environment: environment, currentDirectory: currentDirectory, input: input)
        return child.wait(timeout: timeout)
    }

    /// Starts `executable` and returns at once; call `wait(timeout:)` on the result.
    public static func start(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                             currentDirectory: String? = nil, input: Input = .none,
                             stdinPipe: Pipe? = nil, stdout: Output = .capture,
                             stderr: Output = .capture) throws -> RunningProcess {
        _ = ignoreBrokenPipes
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment ?? Self.environment()
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory, isDirectory: true) }
        /// The pipe to collect `output` through (nil when it goes elsewhere), and what the child gets.
        func connect(_ output: Output) -> (collected: Pipe?, destination: Any) {
            switch output {
            case .capture: let pipe = Pipe(); return (pipe, pipe)
            case .handle(let handle): return (nil, handle)
            case .pipe(let pipe): return (nil, pipe)
            }
        }
        let (out, outDestination) = connect(stdout)
        let (err, errDestination) = connect(stderr)
        process.standardOutput = outDestination
        process.standardError = errDestination
        var feed: (Pipe, Data)? = nil
        if let stdinPipe {
            process.standardInput = stdinPipe
        } else {
            switch input {
            case .none: process.standardInput = FileHandle.nullDevice
            case .file(let path):
                guard let handle = FileHandle(forReadingAtPath: path) else {
                    throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
                }
                process.standardInput = handle
            case .data(let data):
                let pipe = Pipe()
                process.standardInput = pipe
                feed = (pipe, data)
            }
        }
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let started = Date()
        try process.run()
        let running = RunningProcess(process: process, exited: exited, started: started)
        if let out { running.drain(out.fileHandleForReading, into: \.stdout) } else { running.markStdoutClosed() }
        if let err { running.drain(err.fileHandleForReading, into: \.stderr) }
        if let (pipe, data) = feed {
            let writer = pipe.fileHandleForWriting
            running.group.enter()
            Thread.detachNewThread {
                // A child that exits without reading all of it makes this fail with EPIPE:
                // harmless, as SIGPIPE is ignored (see `ignoreBrokenPipes`).
                try? writer.write(contentsOf: data)
                try? writer.close()
                running.group.leave()
            }
        }
        return running
    }
}

/// A child process started by `HaulProcess.start`.
// @unchecked Sendable: `process` is only used for its pid and exit status after the
// termination semaphore fired, the collected output lives in a Mutex, and NSCondition is
// thread-safe.
public final class RunningProcess: @unchecked Sendable {
    struct Output {
        var stdout = Data()
        var stderr = Data()
        var stdoutClosed = false
    }

    let process: Process
    let exited: DispatchSemaphore
    let started: Date
    let group = DispatchGroup()
    let output = Mutex(Output())
    /// Broadcast whenever output arrives or a stream ends.
    let arrived = NSCondition()

    init(process: Process, exited: DispatchSemaphore, started: Date) {
        self.process = process
        self.exited = exited
        self.started = started
    }

    public var processIdentifier: Int32 { process.processIdentifier }

    func drain(_ handle: FileHandle, into field: WritableKeyPath<Output, Data> & Sendable) {
        group.enter()
        Thread.detachNewThread {
            while true {
                let data = handle.availableData  // empty at end of file
                self.output.withLock {
                    $0[keyPath: field].append(data)
                    if data.isEmpty && field == \Output.stdout { $0.stdoutClosed = true }
                }
                self.arrived.lock()
                self.arrived.broadcast()
                self.arrived.unlock()
                if data.isEmpty { break }
            }
            // Closed here: the Pipe lives as long as the Process object, which Foundation keeps,
            // and an open read end per stream and child had the test process run out of
            // descriptors (about 1,500 by the end of the suite) where the limit is 1,024.
            try? handle.close()
            self.group.leave()
        }
    }

    func markStdoutClosed() {
        output.withLock { $0.stdoutClosed = true }
    }

    /// Waits until the child's standard output contains `marker` (`times` times or more: true),
    /// or it closes its output or `timeout` passes first (false). Woken by each chunk of output,
    /// not by polling.
    public func waitForOutput(_ marker: String, times: Int = 1, timeout: TimeInterval) -> Bool {
        let needle = Data(marker.utf8)
        let deadline = Date(timeIntervalSinceNow: timeout)
        func found(_ data: Data) -> Bool {
            var count = 0
            var from = data.startIndex
            while count < times, let range = data.range(of: needle, in: from..<data.endIndex) {
                count += 1
                from = range.upperBound
            }
            return count >= times
        }
        arrived.lock()
        defer { arrived.unlock() }
        while true {
            let (done, closed) = output.withLock { (found($0.stdout), $0.stdoutClosed) }
            if done { return true }
            if closed || !arrived.wait(until: deadline) { return output.withLock { found($0.stdout) } }
        }
    }

    /// Waits for exit; kills the child (by its pid, with SIGKILL) when `timeout` passes first.
    public func wait(timeout: TimeInterval) -> ProcessResult {
        var timedOut = false
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
        }
        let seconds = Date().timeIntervalSince(started)
        // The pipes reach end-of-file once the child (and any grandchild holding them) is gone.
        _ = group.wait(timeout: .now() + 10)
        let collected = output.withLock { $0 }
        let signal = process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
        return ProcessResult(status: process.terminationStatus, signal: signal, stdout: collected.stdout, stderr: collected.stderr,
                             timedOut: timedOut, seconds: seconds)
    }
}
