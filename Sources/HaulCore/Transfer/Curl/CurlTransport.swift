import CCurl
import Foundation
import Synchronization

/// The libcurl transport, haul's default: every fetch runs on one `CurlMultiLoop` (one thread,
/// one multi handle), with its body written to the sink inside libcurl's write callback.
///
/// Guarantees: only http and https are fetched (`CURLOPT_PROTOCOLS_STR`), redirects included,
/// and redirects are judged by `RedirectPolicy` (libcurl follows none itself); the request asks
/// for `Accept-Encoding: identity` and nothing is decoded; the sink sees the final head before
/// any body byte; memory stays bounded whatever the disk's speed — the write happens inside
/// the callback, so a slow disk stops libcurl reading the socket and TCP slows the sender; no
/// per-host connection limit (the engine holds the per-host cap); HTTP/2 over TLS when the
/// server offers it (then the engine's cap counts requests in flight, not connections).
public final class CurlTransport: Transport {
    public struct Options: Sendable {
        public var userAgent: String
        /// CA bundle and folder to trust instead of the system's (CURLOPT_CAINFO / CAPATH).
        public var caFile: String?
        public var caPath: String?
        /// CURLOPT_BUFFERSIZE: 100 KiB, as curl's tool uses; at 16 KiB one big file ran ~0.84×.
        public var receiveBufferSize: Int
        /// Proxy, verification, HTTP version and rate limits (their CA files are read into
        /// `caFile` and `caPath` by `init(connection:environment:)`).
        public var connection: ConnectionOptions

        public init(userAgent: String = "haul/\(HaulVersion.string)", caFile: String? = nil, caPath: String? = nil,
                    receiveBufferSize: Int = 100 * 1024, connection: ConnectionOptions = ConnectionOptions()) {
            self.userAgent = userAgent
            self.caFile = caFile
            self.caPath = caPath
            self.receiveBufferSize = receiveBufferSize
            self.connection = connection
        }

        /// The options of a run: `--cacert` and `--capath` when given, else `CURL_CA_BUNDLE` or
        /// `SSL_CERT_FILE` for the CA bundle and `SSL_CERT_DIR` for a CA folder, as curl's tool
        /// reads them. (Proxy variables, http_proxy and the rest, libcurl reads itself.)
        public init(connection: ConnectionOptions,
                    environment: [String: String] = ProcessInfo.processInfo.environment) {
            func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
            self.init(caFile: connection.caFile ?? variable("CURL_CA_BUNDLE") ?? variable("SSL_CERT_FILE"),
                      caPath: connection.caPath ?? (connection.caFile == nil ? variable("SSL_CERT_DIR") : nil),
                      connection: connection)
        }

        /// `init(connection:environment:)` with no option given.
        public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Options {
            Options(connection: ConnectionOptions(), environment: environment)
        }
    }

    /// Why the transport could not be made.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String { "libcurl could not be initialised" }
    }

    private let loop: CurlMultiLoop

    public init(options: Options = .fromEnvironment()) throws {
        guard let loop = CurlMultiLoop(options: options) else { throw StartError() }
        self.loop = loop
    }

    deinit { loop.close() }

    public func fetch(_ request: FetchRequest, into sink: BodySink) async -> FetchResult {
        if Task.isCancelled { return FetchResult(head: nil, failure: .cancelled) }
        let pending = PendingCancel()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                pending.started(start(request, into: sink) { continuation.resume(returning: $0) })
            }
        } onCancel: {
            pending.cancel()
        }
    }

    public func start(_ request: FetchRequest, into sink: BodySink,
                      completion: @escaping @Sendable (FetchResult) -> Void) -> FetchHandle {
        if let refusal = RedirectPolicy.refusal(toStart: request.url) {
            completion(FetchResult(head: nil, failure: .badRedirect(refusal)))
            return CurlFetchHandle(transfer: nil, loop: loop)
        }
        let transfer = CurlEasyTransfer(request: request, sink: sink)
        transfer.onEnd = completion
        loop.submit(transfer)
        return CurlFetchHandle(transfer: transfer, loop: loop)
    }

    public func cancelAll() {
        loop.cancelAll()
    }

    /// The loop's thread, which ends every fetch (see `CurlMultiLoop.enqueue`).
    public var workQueue: (any TimerWorkQueue)? { loop }

    /// "libcurl/7.88.1 OpenSSL/3.0.17 nghttp2/1.52.0": libcurl's version and those of its TLS
    /// and HTTP/2 libraries.
    public static var versionDescription: String {
        guard let info = haul_curl_version_info() else { return "libcurl (unknown version)" }
        var parts = ["libcurl/" + String(cString: info.pointee.version)]
        if let ssl = info.pointee.ssl_version { parts.append(String(cString: ssl)) }
        if let nghttp2 = info.pointee.nghttp2_version { parts.append("nghttp2/" + String(cString: nghttp2)) }
        return parts.joined(separator: " ")
    }
}

/// Cancels one libcurl transfer.
struct CurlFetchHandle: FetchHandle {
    let transfer: CurlEasyTransfer?
    let loop: CurlMultiLoop

    func cancel() {
        if let transfer { loop.cancel(transfer) }
    }
}

/// A cancellation that may come before the fetch it cancels has its handle.
final class PendingCancel: Sendable {
    private let state = Mutex<(handle: FetchHandle?, cancelled: Bool)>((nil, false))

    func started(_ handle: FetchHandle) {
        let cancelled = state.withLock { state -> Bool in
            state.handle = handle
            return state.cancelled
        }
        if cancelled { handle.cancel() }
    }

    func cancel() {
        let handle = state.withLock { state -> FetchHandle? in
            state.cancelled = true
            return state.handle
        }
        handle?.cancel()
    }
}
