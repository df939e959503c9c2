import CCurl
import Foundation

/// libcurl's process-wide set-up, done once before the first handle.
enum CurlGlobal {
    /// The result of `curl_global_init`, run on first use (a `static let` runs once, thread-safely).
    static let initialized: Bool = haul_curl_global_init() == CURLE_OK
}

/// One libcurl easy handle and its error buffer. `CURL` and `CURLM` both import as raw pointers,
/// so each gets its own type and the compiler keeps them apart.
///
/// Guarantees: the handle is cleaned up exactly once, when this object goes; the error buffer
/// lives as long as the handle that writes into it. Used from one thread at a time (the loop's).
final class CurlEasy {
    let raw: UnsafeMutableRawPointer
    /// CURLOPT_ERRORBUFFER: libcurl writes a message here when a transfer fails.
    private let errorBuffer: UnsafeMutablePointer<CChar>

    init?() {
        guard CurlGlobal.initialized, let raw = curl_easy_init() else { return nil }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// Clears every option (connections and caches stay) and the last error message.
    func reset() {
        curl_easy_reset(raw)
        errorBuffer[0] = 0
        set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
    }

    /// The message of the last failure ("" when libcurl wrote none).
    var errorMessage: String { String(cString: errorBuffer) }

    @discardableResult func set(_ option: CURLoption, _ value: Int) -> CURLcode {
        haul_easy_setopt_long(raw, option, value)
    }

    /// libcurl copies the text. Through `withCString`, which lends a string's own bytes (or a
    /// copy on the stack for a short one): passing a String where C wants a pointer makes a heap
    /// copy of it every time, five a transfer.
    @discardableResult func set(_ option: CURLoption, _ value: String) -> CURLcode {
        value.withCString { haul_easy_setopt_string(raw, option, $0) }
    }

    @discardableResult func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) -> CURLcode {
        haul_easy_setopt_pointer(raw, option, value)
    }

    @discardableResult func set(_ option: CURLoption, list value: UnsafeMutablePointer<curl_slist>?) -> CURLcode {
        haul_easy_setopt_list(raw, option, value)
    }

    @discardableResult func set(_ option: CURLoption, function value: curl_write_callback) -> CURLcode {
        haul_easy_setopt_write_function(raw, option, value)
    }

    func info(_ item: CURLINFO) -> Int {
        var value = 0
        return haul_easy_getinfo_long(raw, item, &value) == CURLE_OK ? value : 0
    }

    /// A `curl_off_t` item (the `*_TIME_T` timings, in microseconds); 0 when not known.
    func offsetInfo(_ item: CURLINFO) -> Int64 {
        var value: curl_off_t = 0
        return haul_easy_getinfo_offset(raw, item, &value) == CURLE_OK ? Int64(value) : 0
    }

    /// The transfer object stored with CURLOPT_PRIVATE.
    static func privatePointer(of raw: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        var value: UnsafeMutableRawPointer?
        return haul_easy_getinfo_pointer(raw, CURLINFO_PRIVATE, &value) == CURLE_OK ? value : nil
    }
}

/// An owned `curl_slist` of request header lines.
///
/// Guarantees: freed exactly once, when this object goes (so keep it as long as the transfer
/// that uses it).
final class CurlHeaderList {
    private(set) var raw: UnsafeMutablePointer<curl_slist>?

    init(_ lines: [String]) {
        for line in lines { raw = line.withCString { curl_slist_append(raw, $0) } }
    }

    deinit { curl_slist_free_all(raw) }
}
