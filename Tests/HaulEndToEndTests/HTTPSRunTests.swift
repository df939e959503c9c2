import Foundation
import HaulCore
import HaulTestSupport
import XCTest

/// `haul get` over https, as users run it, with each transport, against nginx on loopback with a
/// throwaway CA (`HTTPSServer`).
final class HTTPSRunTests: XCTestCase {
    private static let unshare = "/usr/bin/unshare"
    private static let systemBundle = "/etc/ssl/certs/ca-certificates.crt"

    private func startServer() throws -> HTTPSServer {
        do {
            return try HTTPSServer()
        } catch let missing as HTTPSServer.ToolMissing {
            guard HTTPSServer.ToolMissing.requiredByEnvironment else { throw XCTSkip(missing.description) }
            XCTFail("CI=true, yet \(missing)")
            throw missing
        }
    }

    /// The default transport trusts the CA bundle named by `SSL_CERT_FILE` (as curl does, when
    /// `CURL_CA_BUNDLE` does not name one), and without it refuses the server after one attempt,
    /// with the reason (and what to do) recorded and no file placed.
    func testTheDefaultTransportTrustsTheBundleInSSLCertFile() throws {
        let h = try RunHarness(self)
        let server = try startServer()
        defer { server.stop() }
        let data = runTestData(300_000, seed: 91)
        try server.write("a.bin", data)
        let url = server.url("/a.bin").absoluteString

        let untrusted = try HaulProcess.run(h.haul, ["get", url, "-d", h.out, "--db", h.db, "--quiet"],
                                            environment: HaulProcess.environment(["SSL_CERT_FILE": "", "CURL_CA_BUNDLE": "", "HAUL_TRANSPORT": ""]),
                                            currentDirectory: h.temp.path, timeout: 30)
        XCTAssertEqual(untrusted.status, 1, untrusted.stdoutText + untrusted.stderrText)
        XCTAssertNil(h.contents("a.bin"))
        let job = try h.show(1)
        let reason = job["last_error"] as? String ?? ""
        XCTAssertTrue(reason.contains("certificate not trusted") && reason.contains("--cacert"), reason)
        XCTAssertEqual(job["attempts"] as? Int, 1, "an untrusted certificate fails at once, not after retries")

        let retry = try h.run(["retry", "--failed"])
        XCTAssertEqual(retry.status, 0, retry.stderrText)
        let trusted = try HaulProcess.run(h.haul, ["get", "-d", h.out, "--db", h.db, "--quiet"],
                                          environment: HaulProcess.environment(["SSL_CERT_FILE": server.caFile, "CURL_CA_BUNDLE": "", "HAUL_TRANSPORT": ""]),
                                          currentDirectory: h.temp.path, timeout: 30)
        XCTAssertEqual(trusted.status, 0, trusted.stdoutText + trusted.stderrText)
        XCTAssertEqual(h.contents("a.bin"), data)
        XCTAssertEqual(h.tempFiles(), [])
    }

    /// URLSession on Linux reads no CA variable, so its run trusts the test CA the only way it
    /// can: in a mount namespace where the test CA stands in the system's bundle (needs root, or
    /// is skipped). Both transports then fetch the same files over https, HTTP/2 for libcurl.
    func testBothTransportsFetchOverHTTPS() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: Self.unshare),
              FileManager.default.fileExists(atPath: Self.systemBundle) else {
            throw XCTSkip("needs root, \(Self.unshare) and \(Self.systemBundle) to stand the test CA in for the system's")
        }
        let server = try startServer()
        defer { server.stop() }
        let files = (0..<6).map { runTestData(50_000 + $0 * 7_919, seed: 100 + UInt64($0)) }
        for (index, data) in files.enumerated() { try server.write("f\(index).bin", data) }

        for kind in TransportKind.allCases {
            let h = try RunHarness(self)
            try h.add(files.indices.map { server.url("/f\($0).bin").absoluteString })
            // sh -c 'mount --bind CA BUNDLE && exec haul …' in a private mount namespace.
            let script = "mount --bind \"$0\" \(Self.systemBundle) && exec \"$@\""
            let result = try HaulProcess.run(
                URL(fileURLWithPath: Self.unshare),
                ["--mount", "--propagation", "private", "/bin/sh", "-c", script, server.caFile,
                 h.haul.path, "run", "--db", h.db, "--transport", kind.rawValue, "--max-attempts", "1", "--quiet"],
                environment: HaulProcess.environment(["SSL_CERT_FILE": "", "CURL_CA_BUNDLE": ""]),
                currentDirectory: h.temp.path, timeout: 60)
            XCTAssertEqual(result.status, 0, "\(kind.rawValue): \(result.stdoutText)\(result.stderrText)")
            for (index, data) in files.enumerated() {
                XCTAssertEqual(h.contents("f\(index).bin"), data, "\(kind.rawValue): f\(index).bin")
            }
            XCTAssertEqual(h.tempFiles(), [], kind.rawValue)
        }
        let protocols = Set(server.accessLog().compactMap(HTTPSServer.protocolOf(logLine:)))
        XCTAssertTrue(protocols.contains("HTTP/2.0"), "libcurl used HTTP/2: \(protocols)")
    }
}
