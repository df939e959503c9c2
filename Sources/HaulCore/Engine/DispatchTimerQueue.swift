import Dispatch

/// A serial dispatch queue that keeps one timer (`TimerWorkQueue`), for the engine's events when
/// the transport has no thread of its own (URLSession): the timer fires on the queue itself.
///
/// Guarantees: handed-in blocks and the timer's block run on the one serial queue, one at a
/// time, in `WorkQueue`'s order; the timer's block runs once, no earlier than asked; setting the
/// timer again replaces a block not yet run, and `cancelTimer` drops it.
///
/// `@unchecked Sendable`: `source` and `block` are touched only on `queue` (`setTimer` and
/// `cancelTimer` are called there, as `TimerWorkQueue` requires, and the timer's handler runs
/// there).
final class DispatchTimerQueue: TimerWorkQueue, @unchecked Sendable {
    private let queue: DispatchQueue
    private var source: DispatchSourceTimer?
    private var block: (@Sendable () -> Void)?

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    deinit {
        source?.cancel()
    }

    func enqueue(_ block: @escaping @Sendable () -> Void) {
        queue.async(execute: block)
    }

    func setTimer(afterMilliseconds milliseconds: Int, _ block: @escaping @Sendable () -> Void) {
        self.block = block
        if source == nil {
            let source = DispatchSource.makeTimerSource(queue: queue)
            source.setEventHandler { [weak self] in
                guard let self else { return }
                let due = self.block
                self.block = nil  // before the block, which may set the timer again
                due?()
            }
            source.resume()
            self.source = source
        }
        source?.schedule(deadline: .now() + .milliseconds(max(0, milliseconds)), leeway: .milliseconds(1))
    }

    func cancelTimer() {
        block = nil
        source?.cancel()
        source = nil
    }
}
