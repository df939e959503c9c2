import Dispatch
import Foundation
import Synchronization

/// Turns SIGINT and SIGTERM into a clean stop: the first calls `onFirst`; a second exits at once.
/// Remembers the exit status the signal asks for (130 for SIGINT, 143 for SIGTERM).
///
/// Guarantees: the same signal again within `echoWindow` of the first counts once — `timeout`
/// and many supervisors signal the process and then its whole group, so one request to stop
/// arrives twice; a second Ctrl-C after that still quits at once.
final class SignalWatcher {
    /// How soon a repeat of the first signal is taken as the same request.
    static let echoWindow = Duration.seconds(1)

    private let sources: [any DispatchSourceSignal]
    /// The first signal received and when, shared with the handlers.
    private final class Received: Sendable {
        let value = Mutex<(number: Int32, at: ContinuousClock.Instant)?>(nil)
    }
    private let received = Received()

    init(onFirst: @escaping @Sendable (Int32) -> Void) {
        var sources: [any DispatchSourceSignal] = []
        let queue = DispatchQueue(label: "haul.signals")
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            sources.append(source)
        }
        self.sources = sources
        for (source, number) in zip(sources, [SIGINT, SIGTERM]) {
            source.setEventHandler { [received] in
                enum Meaning { case first, echo, again }
                let meaning = received.value.withLock { value -> Meaning in
                    let now = ContinuousClock.now
                    guard let earlier = value else { value = (number, now); return .first }
                    return earlier.number == number && now - earlier.at < Self.echoWindow ? .echo : .again
                }
                switch meaning {
                case .first:
                    onFirst(number)
                case .echo:
                    break
                case .again:
                    Console.error("haul: stopping at once")
                    _exit(128 + number)
                }
            }
            source.resume()
        }
    }

    var exitCode: Int32 { 128 + (received.value.withLock { $0?.number } ?? SIGINT) }
}
