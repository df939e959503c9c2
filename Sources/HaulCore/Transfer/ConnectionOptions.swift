/// How one run connects, as the user asked (`--proxy`, `--cacert`, `-k`, `--limit-rate`…): the
/// same for every job of the run, unlike a job's request profile.
///
/// Guarantees: a plain value; the default asks for nothing (a run without options pays nothing
/// for them); `requested` names every option set, by its command-line name, so a transport that
/// lacks one can say which.
public struct ConnectionOptions: Sendable, Equatable {
    /// `--proxy URL`: http://, https://, socks5:// or socks5h://, with credentials if needed.
    public var proxy: String?
    /// `--noproxy HOSTS`: comma-separated hosts (and domains) reached directly; `*` for all.
    public var noProxy: String?
    /// `--cacert FILE`, `--capath DIR`: CA certificates to trust instead of the system's.
    public var caFile: String?
    public var caPath: String?
    /// `-k, --insecure`: do not verify the server's certificate.
    public var insecure = false
    /// `--http1.1`: never HTTP/2.
    public var http11Only = false
    /// `--limit-rate RATE`: bytes a second for all transfers together.
    public var limitRate: Int64?
    /// `--per-host-rate RATE`: bytes a second for each host's transfers together.
    public var perHostRate: Int64?

    public init() {}

    /// The schemes `--proxy` accepts.
    public static let proxySchemes: Set<String> = ["http", "https", "socks5", "socks5h"]

    public var requested: [String] {
        var names: [String] = []
        if proxy != nil { names.append("--proxy") }
        if noProxy != nil { names.append("--noproxy") }
        if caFile != nil { names.append("--cacert") }
        if caPath != nil { names.append("--capath") }
        if insecure { names.append("--insecure") }
        if http11Only { names.append("--http1.1") }
        if limitRate != nil { names.append("--limit-rate") }
        if perHostRate != nil { names.append("--per-host-rate") }
        return names
    }
}
