/// One slot of a host's concurrency cap, held by one process: a transfer to the host runs only
/// inside a slot its process holds.
///
/// Guarantees: the live slots of a host (held and not expired) never number more than the
/// host's cap, over every process sharing the queue; only the holder of `token` renews or gives
/// back the slot.
public struct SlotLease: Sendable, Hashable {
    public let hostID: Int
    /// 0 ..< the host's cap.
    public let index: Int
    public let token: String

    public init(hostID: Int, index: Int, token: String) {
        self.hostID = hostID
        self.index = index
        self.token = token
    }
}
