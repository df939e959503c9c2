/// What a worker learned about a transfer still in progress, written in batches.
public struct Progress: Sendable, Equatable {
    public var jobID: Int
    public var token: String
    public var receivedBytes: Int
    public var expectedBytes: Int?
    public var etag: String?
    public var lastModified: String?
    /// The URL (after redirects) the bytes and the validator came from.
    public var url: String?

    public init(jobID: Int, token: String, receivedBytes: Int, expectedBytes: Int?, etag: String? = nil, lastModified: String? = nil,
                url: String? = nil) {
        self.jobID = jobID
        self.token = token
        self.receivedBytes = receivedBytes
        self.expectedBytes = expectedBytes
        self.etag = etag
        self.lastModified = lastModified
        self.url = url
    }
}
