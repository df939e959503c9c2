import Foundation
import HaulCore

/// How one download attempt ended: its file placed, or why not.
public enum AttemptResult: Equatable, Sendable {
    case placed(bytes: Int64, status: Int)
    case failed(DownloadAttempt.Failure, status: Int?)
}

/// One download attempt as the transport tests make it: a `DownloadAttempt` fetched through a
/// transport, verified, and placed as the engine places a batch (here, a batch of one).
public struct AttemptOutcome {
    public let result: AttemptResult
    public let fetch: FetchResult
    public let attempt: DownloadAttempt

    public var failure: DownloadAttempt.Failure? {
        if case .failed(let failure, _) = result { return failure }
        return nil
    }

    /// One attempt at `url` into `temp` through `transport`, resuming when `validator` is given
    /// and `temp` has bytes.
    public static func download(_ url: URL, with transport: any Transport, into temp: TempFile,
                                validator: Validator? = nil, total: Int64? = nil, checksum: Checksum? = nil,
                                stall: TimeInterval = 10, timeout: TimeInterval? = nil) async throws -> AttemptOutcome {
        let attempt = try DownloadAttempt(temp: temp, expectedChecksum: checksum, storedValidator: validator, storedTotal: total)
        let request = FetchRequest(url: url, headers: attempt.requestHeaders, stallTimeout: stall, totalTimeout: timeout)
        let fetch = await transport.fetch(request, into: attempt)
        return AttemptOutcome(result: place(attempt.verify(fetch)), fetch: fetch, attempt: attempt)
    }

    /// Places a verified file as the engine places a batch: its bytes made durable, the rename,
    /// then its folder flushed.
    public static func place(_ verification: DownloadAttempt.Verification) -> AttemptResult {
        switch verification {
        case .failed(let failure, let status):
            return .failed(failure, status: status)
        case .notModified:
            return .failed(.http(status: 304, retryAfter: nil), status: 304)
        case .verified(let file):
            defer { file.close() }
            if let problem = VerifiedFile.makeDurable([file])[0] {
                return .failed(.disk(problem.message), status: file.status)
            }
            do { _ = try file.place() } catch {
                return .failed(.disk(String(describing: error)), status: file.status)
            }
            TempFile.syncFolder(of: file.temp.destination)
            return .placed(bytes: file.bytes, status: file.status)
        }
    }
}
