import Foundation

/// The redirects one fetch has followed so far, judged the same way by every transport.
///
/// Guarantees: a hop is taken only to an http or https URL, at most `maximumHops` times, never
/// back to a URL already visited; the Location is resolved by haul (RFC 3986, against the URL
/// that answered), never by the transport's library; refusals name the target with its
/// credentials redacted; credential headers (and .netrc credentials) never follow a hop to another
/// origin.
public struct RedirectPolicy: Sendable {
    public static let maximumHops = 10

    /// Statuses that redirect a GET (300 and 304 do not).
    public static func isRedirect(_ status: Int) -> Bool {
        status == 301 || status == 302 || status == 303 || status == 307 || status == 308
    }

    /// The target of a redirect from `current` with this Location value (nil: none usable).
    public static func target(location: String?, from current: URL?) -> URL? {
        guard let location = location?.trimmingCharacters(in: .whitespaces), !location.isEmpty else { return nil }
        return URL(string: location, relativeTo: current)?.absoluteURL
    }

    /// Headers that carry credentials (lower-case): sent only to the request's own origin, never
    /// to another one a redirect leads to (nor over plain http after https: another origin).
    public static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// True when `a` and `b` have the same scheme, host and port (RFC 6454), default ports filled in.
    public static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func origin(_ url: URL) -> (String, String, Int)? {
            guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
            return (scheme, host, url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1))
        }
        guard let left = origin(a), let right = origin(b) else { return false }
        return left == right
    }

    /// `headers` as they may go to `target` on a fetch that began at `start`: all of them on
    /// `start`'s origin, none of the credential headers anywhere else.
    public static func headers(_ headers: [String: String], from start: URL, toward target: URL) -> [String: String] {
        guard headers.keys.contains(where: { credentialHeaders.contains($0.lowercased()) }),
              !sameOrigin(start, target) else { return headers }
        return headers.filter { !credentialHeaders.contains($0.key.lowercased()) }
    }

    /// Why a fetch of `url` must not even start (a scheme other than http and https), or nil.
    public static func refusal(toStart url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return "refused to fetch a \(url.scheme ?? "scheme-less") URL: only http and https are fetched"
        }
        return nil
    }

    /// A failure of a fetch that ended at `current`, as the engine should read it: one that
    /// says a host cannot be reached (or never answered) is the job's host's only when that host
    /// is the one that failed. After a redirect to another host it is a failure of this job's
    /// way there, tried again by this job with backoff: the job's own host answered, and its
    /// other jobs should not wait for it or fail as "host unreachable".
    public func failureAtEnd(_ failure: FetchFailure, current: URL?) -> FetchFailure {
        // Hosts as the queue keys them (`http://a/` and `http://a:80/`, `127.1` and `127.0.0.1`
        // are one host).
        guard hops > 0, let current,
              (try? HTTPURL(current.absoluteString).hostKey) != (try? HTTPURL(start.absoluteString).hostKey) else {
            return failure
        }
        let place = "at \(HTTPURL.redact(current.absoluteString)), where a redirect led"
        switch failure {
        case .unreachable(let why): return .transport("\(why) (\(place))")
        case .stalled, .timedOut: return .transport("\(failure.description) (\(place))")
        default: return failure
        }
    }

    private var visited: Set<String>
    public private(set) var hops = 0
    /// The URL the fetch began with: its origin alone gets the credential headers.
    public let start: URL

    public init(start: URL) {
        self.start = start
        visited = [start.absoluteString]
    }

    /// Takes one more hop to `target`; returns why it is refused, or nil.
    public mutating func follow(to target: URL?) -> String? {
        hops += 1
        guard let target else { return "redirect without a usable Location" }
        let shown = HTTPURL.redact(target.absoluteString)
        guard let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return "redirect to \(shown) refused: only http and https are fetched"
        }
        if hops > Self.maximumHops {
            return "more than \(Self.maximumHops) redirects (the last to \(shown))"
        }
        if !visited.insert(target.absoluteString).inserted {
            return "redirect loop (back to \(shown))"
        }
        return nil
    }
}
