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

    @Test func leavesTextWithoutCredentialsAlone() {
        let text = "HTTP 404 for http://a.example/p?q=a@b and mailto:x@y"
        #expect(HTTPURL.redact(text) == text)
    }
}
