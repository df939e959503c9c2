/// A worker's registration was removed by another worker, because its heartbeat was late by more
/// than the queue's worker timeout: its jobs and slots went back to the queue, so it must stop.
///
/// Guarantees: thrown by an exchange before anything of that exchange is written; the engine ends
/// its run at once on it (its transfers stop, their jobs already belong to the queue again).
public struct WorkerEvicted: Error, StoreError, CustomStringConvertible {
    public init(owner: String) { self.owner = owner }

    public let owner: String
    public var description: String {
        "this worker (\(owner)) was taken off the queue by the others: its heartbeat was late by more than the queue's worker timeout, so its jobs went back to the queue; run haul again to rejoin"
    }
    public func explained(location: String, busyTimeout: Double) -> String {
        "\(description) (queue \(location))"
    }
}
