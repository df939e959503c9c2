import Foundation

/// Records what every scripted route answered, so a test can count requests across servers
/// (and wait for them) and tell how many times each path was served whole.
public final class ResponseLedger: Sendable {
    /// One answer a route gave.
    public struct Entry: Sendable {
        public let path: String
        public let status: Int
        /// Whether the Range header was present.
        public let ranged: Bool
        /// A 200 or 206 sent without a scripted cut: the body reaches the client whole unless
        /// the client goes away first.
        public let whole: Bool
    }

    /// Every answer, in order.
    public let log = RequestLog<Entry>()

    public init() {}

    /// `handler`, recording each answer under the request's path.
    public func wrap(_ handler: @escaping FaultServer.Handler) -> FaultServer.Handler {
        { request in
            let response = handler(request)
            let entry = Entry(path: request.path, status: response.status, ranged: request.headers["Range"] != nil,
                              whole: (response.status == 200 || response.status == 206) && response.bodyByteLimit == nil
                                  && !response.endless)
            self.log.append(entry)
            return response
        }
    }

    /// Requests answered so far, over every server whose routes this ledger wraps.
    public var requestCount: Int { log.count() }

    public func entries(path: String) -> [Entry] { log.entries { $0.path == path } }

    /// Answers to `path` that were 200 or 206 and not cut by a scripted fault.
    public func wholeSuccesses(path: String) -> Int { entries(path: path).count { $0.whole } }

    /// Blocks until at least `count` requests were answered, or `timeout` passes.
    @discardableResult
    public func waitForRequests(atLeast count: Int, timeout: TimeInterval) -> Bool {
        log.wait(count: count, timeout: timeout)
    }
}

/// A seeded batch of jobs over several `FaultServer`s mixing every kind of behaviour haul must
/// survive: healthy files of many sizes (strong ETags, so resume works), large files paced to be
/// mid-transfer for a while, slow bodies, 429/503 with Retry-After, resets and truncations
/// mid-body, permanent 404s, and resources whose version flips between requests (same length,
/// different bytes and ETag), so a resume that ignored the validator would splice two versions.
///
/// Every fault happens on a route's first request only (or, for flipping resources, on every
/// other one), so each job but the 404s succeeds within a few attempts.
public final class CrashScenario: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case small, large, slow, tooManyRequests, unavailable, reset, truncated, missing, flipping
    }

    public struct Job: Sendable {
        /// Index in `jobs`, 0-based.
        public let number: Int
        public let kind: Kind
        public let server: Int
        public let path: String
        /// The `out=` name, relative to the output folder.
        public let name: String
        /// What a finished file may hold: one version, two for a flipping resource, none for a 404.
        public let versions: [Data]

        public var mustFail: Bool { kind == .missing }
    }

    public let jobs: [Job]
    public let ledger = ResponseLedger()

    /// Share of each kind, in percent (the rest are `.small`).
    public static let defaultMix: [Kind: Int] = [
        .large: 4, .slow: 10, .tooManyRequests: 6, .unavailable: 6, .reset: 10, .truncated: 10, .missing: 6, .flipping: 3,
    ]

    /// Builds `count` jobs spread over `servers` and installs their routes.
    /// - Parameter mix: percent per kind; kinds left out get none (`.small` takes the rest).
    public init(seed: UInt64, count: Int, servers: [FaultServer], mix: [Kind: Int] = CrashScenario.defaultMix) {
        var random = SeededGenerator(seed: seed)
        var kinds: [Kind] = []
        for kind in Kind.allCases where kind != .small {
            let share = mix[kind] ?? 0
            // At least one of each kind asked for, however small the batch.
            let wanted = share > 0 ? max(1, count * share / 100) : 0
            kinds += Array(repeating: kind, count: wanted)
        }
        kinds = Array(kinds.prefix(count))
        kinds += Array(repeating: .small, count: count - kinds.count)
        kinds.shuffle(using: &random)

        var jobs: [Job] = []
        for (number, kind) in kinds.enumerated() {
            let server = number % servers.count
            let path = "/\(kind.rawValue)/\(number)"
            let name = "h\(server)/\(kind.rawValue)-\(number).bin"
            let size = Self.size(of: kind, random: &random)
            var versions: [Data] = []
            if kind != .missing { versions.append(Self.data(size, random: &random)) }
            if kind == .flipping { versions.append(Self.data(size, random: &random)) }
            jobs.append(Job(number: number, kind: kind, server: server, path: path, name: name, versions: versions))
        }
        self.jobs = jobs
        for job in jobs { install(job, on: servers[job.server], random: &random) }
    }

    /// `URL out=NAME` lines for `haul add`.
    public func lines(servers: [FaultServer]) -> [String] {
        jobs.map { "\(servers[$0.server].url($0.path).absoluteString) out=\($0.name)" }
    }

    // MARK: Routes

    /// Body pacing of large and flipping files: about 2.5 MB/s, so one stays in flight for
    /// about half a second per megabyte.
    static let largePacing = (bytes: 64 * 1024, delay: 0.025)

    private func install(_ job: Job, on server: FaultServer, random: inout SeededGenerator) {
        let etag = "\"\(job.kind.rawValue)-\(job.number)-v1\""
        let wrap = ledger.wrap
        guard let data = job.versions.first else {
            server.route(job.path, wrap { _ in FaultServer.Response.text("no such file\n", status: 404) })
            return
        }
        let large = data.count >= 1 << 20
        let file: FaultServer.Handler = { request in
            let response = FaultServer.fileResponse(data, request: request, etag: etag)
            return large ? response.slowBody(bytesPerChunk: Self.largePacing.bytes, delay: Self.largePacing.delay) : response
        }
        switch job.kind {
        case .small, .large:
            server.route(job.path, wrap(file))
        case .slow:
            let chunk = Int.random(in: 2_048...8_192, using: &random)
            let delay = Double.random(in: 0.03...0.08, using: &random)
            server.route(job.path, wrap { request in
                FaultServer.fileResponse(data, request: request, etag: etag).slowBody(bytesPerChunk: chunk, delay: delay)
            })
        case .tooManyRequests, .unavailable:
            let status = job.kind == .tooManyRequests ? 429 : 503
            server.route(job.path, sequence: [
                wrap { _ in FaultServer.Response.status(status, headers: ["Retry-After": "1"]) },
                wrap(file),
            ])
        case .reset, .truncated:
            let cut = max(1, data.count / Int.random(in: 2...5, using: &random))
            let reset = job.kind == .reset
            server.route(job.path, sequence: [
                wrap { request in
                    let response = file(request)
                    return reset ? response.reset(afterBytes: cut) : response.truncated(afterBytes: cut)
                },
                wrap(file),
            ])
        case .flipping:
            // Odd requests get version 1, even ones version 2 (same length, other bytes and
            // ETag); the first is cut mid-body, so the next request is a resume the server
            // must refuse (If-Range no longer matches).
            let other = job.versions[1]
            let otherTag = "\"\(job.kind.rawValue)-\(job.number)-v2\""
            let served = Locked(0)
            server.route(job.path, wrap { request in
                let number = served.update { count -> Int in count += 1; return count }
                let (body, tag) = number % 2 == 1 ? (data, etag) : (other, otherTag)
                let response = FaultServer.fileResponse(body, request: request, etag: tag)
                    .slowBody(bytesPerChunk: Self.largePacing.bytes, delay: Self.largePacing.delay)
                return number == 1 ? response.reset(afterBytes: body.count / 2) : response
            })
        case .missing:
            break
        }
    }

    // MARK: Data

    private static func size(of kind: Kind, random: inout SeededGenerator) -> Int {
        switch kind {
        case .small: return Int.random(in: 1...48_000, using: &random)
        case .large: return Int.random(in: 1_100_000...2_500_000, using: &random)
        case .slow: return Int.random(in: 16_000...96_000, using: &random)
        case .tooManyRequests, .unavailable: return Int.random(in: 1...32_000, using: &random)
        case .reset, .truncated:
            // Some large enough that their validator is kept at once, so the retry resumes.
            return Int.random(in: 0..<10, using: &random) < 3
                ? Int.random(in: 1_100_000...2_000_000, using: &random)
                : Int.random(in: 2_000...64_000, using: &random)
        case .flipping: return Int.random(in: 1_100_000...1_600_000, using: &random)
        case .missing: return 0
        }
    }

    /// `count` seeded bytes, filled a word at a time (fast even in a debug build).
    static func data(_ count: Int, random: inout SeededGenerator) -> Data {
        var data = Data(count: (count + 7) / 8 * 8)
        data.withUnsafeMutableBytes { raw in
            let words = raw.bindMemory(to: UInt64.self)
            for index in words.indices { words[index] = random.next() }
        }
        data.count = count
        return data
    }

    // MARK: Checking

    /// What a file found at a destination is, compared with what the server served.
    public enum Verdict: Sendable, Equatable {
        /// Byte-identical to a version the server served.
        case intact
        /// Missing where a file was due.
        case missing
        /// A prefix of one version followed by the rest of another.
        case spliced
        /// Anything else: short, long, or wrong bytes (an error page, a part…).
        case corrupt
    }

    /// Judges `contents` (nil: no file) against what `job` may hold.
    public static func verdict(_ contents: Data?, for job: Job) -> Verdict {
        guard let contents else { return .missing }
        if job.versions.contains(contents) { return .intact }
        if job.versions.count == 2, contents.count == job.versions[0].count {
            for (first, second) in [(job.versions[0], job.versions[1]), (job.versions[1], job.versions[0])] {
                // The longest prefix of `first`, then does the rest come from `second`?
                var split = 0
                while split < contents.count, contents[split] == first[split] { split += 1 }
                if split > 0, contents[split...] == second[split...] { return .spliced }
            }
        }
        return .corrupt
    }
}
