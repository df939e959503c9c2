import HaulCore
import Testing

/// Credentials in URLs never reach output: every URL in a message is redacted, whatever its scheme.
struct RedactionTests {
    @Test func redactsEveryURLInAMessage() {
        let message = "redirect from https://alice:s3cret@a.example/x to ftp://bob:hunter2@b.example/y refused"
        let redacted = HTTPURL.redact(message)
        #expect(!redacted.contains("s3cret"))
        #expect(!redacted.contains("hunter2"))
        #expect(!redacted.contains("alice") && !redacted.contains("bob"))
        #expect(redacted == "redirect from https://***@a.example/x to ftp://***@b.example/y refused")
    }

    /// A line refused as no URL hides everything up to its last "@", past a "/", "#" or space in
    /// the password, and after a scheme with one slash.
    @Test func aRejectedLineHidesEverythingBeforeItsLastAt() {
        #expect(HTTPURL.redactRejected("https://user:pa/ss@127.0.0.1:1/a") == "https://***@127.0.0.1:1/a")
        #expect(HTTPURL.redactRejected("https://user:pa#ss@127.0.0.1:1/b") == "https://***@127.0.0.1:1/b")
        #expect(HTTPURL.redactRejected("http:/user:secret1@127.0.0.1:1/d") == "http:***@127.0.0.1:1/d")
        #expect(HTTPURL.redactRejected("http://user:pass word@127.0.0.1:1/x") == "http://***@127.0.0.1:1/x")
        #expect(HTTPURL.redactRejected("user:pw@host/x") == "user:***@host/x")
        #expect(HTTPURL.redactRejected("not a url") == "not a url")
    }

    @Test func leavesTextWithoutCredentialsAlone() {
        let text = "HTTP 404 for http://a.example/p?q=a@b and mailto:x@y"
        #expect(HTTPURL.redact(text) == text)
    }
}
