import Dispatch
import Foundation
import Synchronization

/// Turns SIGINT and SIGTERM into a clean stop: the first calls `onFirst`; a second exits at once.
/// Remembers the exit status the signal asks for (130 for SIGINT, 143 for SIGTERM).
final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]
    /// The first signal received, shared with the handlers.
    private final class Received: Sendable {
        let value = Mutex<Int32?>(nil)
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
                let first = received.value.withLock { value -> Bool in
                    defer { if value == nil { value = number } }
                    return value == nil
                }
                if first {
                    onFirst(number)
                } else {
                    FileHandle.standardError.write(Data("haul: stopping at once\n".utf8))
                    _exit(128 + number)
                }
            }
            source.resume()
        }
    }

    var exitCode: Int32 { 128 + (received.value.withLock { $0 } ?? SIGINT) }
}
