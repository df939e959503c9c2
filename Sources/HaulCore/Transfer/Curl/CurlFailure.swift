import CCurl
import Foundation

/// What a libcurl result code means to haul: a `FetchFailure` whose reason says what failed and,
/// where it helps, what the user can do.
///
/// Guarantees: never throws away libcurl's own message (it goes with the reason); a failure that
/// waiting cannot mend (TLS trust, a malformed URL) is permanent and says what to do.
enum CurlFailure {
    /// - Parameter responded: some of a response (its head) arrived before the failure.
    static func failure(_ code: CURLcode, message: String, osErrno: Int, responded: Bool = true) -> FetchFailure {
        let detail = message.isEmpty ? String(cString: curl_easy_strerror(code)) : hidingCredentials(in: message)
        switch code {
        case CURLE_COULDNT_CONNECT:
            return .unreachable(osErrno == Int(ECONNREFUSED) ? "connection refused" : "cannot connect: \(detail)")
        case CURLE_COULDNT_RESOLVE_HOST:
            return .unreachable("host not found (DNS): \(detail)")
        case CURLE_RECV_ERROR where !responded && detail.contains("Too large response headers"),
             CURLE_OUT_OF_MEMORY where !responded:
            // The server answered, with a head larger than libcurl reads (300 KB in all, 100 KB
            // a line, which libcurl 7.88 reports as out of memory): the job's failure, and one
            // that trying again will not mend; not the host being down.
            return .unsupported("the server's response headers are too large to read (libcurl reads at most 300 KB of them, 100 KB a line): \(detail)")
        case CURLE_RECV_ERROR where !responded, CURLE_SEND_ERROR where !responded:
            return .unreachable("connection lost before any answer: \(detail)")
        case CURLE_OPERATION_TIMEDOUT where !responded:
            return .unreachable("timed out before any answer: \(detail)")
        case CURLE_SSL_CONNECT_ERROR:
            return .unreachable("TLS handshake failed: \(detail)")
        case CURLE_COULDNT_RESOLVE_PROXY where detail.contains("proxy syntax"):
            // libcurl says a proxy URL it cannot read (from --proxy or http_proxy) this way too.
            return .unsupported("the proxy's URL is not usable: \(detail); check --proxy and the *_proxy variables")
        case CURLE_COULDNT_RESOLVE_PROXY:
            return .transport("proxy host not found (DNS): \(detail)")
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            return .transport("connection lost mid-transfer: \(detail)")
        case CURLE_GOT_NOTHING:
            return .unreachable("the server closed the connection without answering")
        case CURLE_OPERATION_TIMEDOUT:
            return .transport("timed out: \(detail)")
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS:
            return .untrusted("certificate not trusted (\(detail)): pass --cacert FILE with the CA that signed it, or -k to skip verification")
        case CURLE_SSL_CACERT_BADFILE:
            return .untrusted("cannot read the CA certificates (\(detail)): check --cacert, --capath, SSL_CERT_FILE and CURL_CA_BUNDLE")
        case CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_SHUTDOWN_FAILED, CURLE_USE_SSL_FAILED:
            return .transport("TLS failure: \(detail)")
        case CURLE_UNSUPPORTED_PROTOCOL:
            // Schemes are checked before libcurl sees a URL, so this is an answer that is not
            // HTTP (curl: "Received HTTP/0.9 when not allowed"), e.g. a stray byte on a reused
            // connection: worth another attempt.
            return .transport("the server's answer is not HTTP: \(detail)")
        case CURLE_URL_MALFORMAT:
            return .badRedirect("invalid URL: \(detail)")
        default:
            return .transport("transfer failed: \(detail) (curl error \(code.rawValue))")
        }
    }

    /// libcurl's message with what it quotes (`Unsupported proxy syntax in 'http://u:p w@proxy'`,
    /// a proxy from `--proxy` or `http_proxy`) shown without its user-info: everything up to the
    /// last "@" of a quoted part goes, even past a space, which ends a URL's redaction elsewhere.
    static func hidingCredentials(in message: String) -> String {
        let parts = message.split(separator: "'", omittingEmptySubsequences: false)
        guard parts.count > 2 else { return message }
        return parts.enumerated().map { index, part in
            index % 2 == 1 && index < parts.count - 1 ? HTTPURL.hidingUpToLastAt(part) : String(part)
        }.joined(separator: "'")
    }
}
