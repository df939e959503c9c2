import Foundation
import XCTest
import HaulTestSupport
@testable import HaulCore

/// Exponential backoff with full jitter.
final class BackoffTests: XCTestCase {
    func testCeilingDoublesFromBaseUpToCap() {
        let backoff = Backoff()
        XCTAssertEqual(backoff.base, 1)
        XCTAssertEqual(backoff.cap, 300)
        let expected: [(Int, TimeInterval)] = [(1, 1), (2, 2), (3, 4), (4, 8), (9, 256), (10, 300), (11, 300), (64, 300)]
        for (attempt, ceiling) in expected {
            XCTAssertEqual(backoff.ceiling(afterAttempt: attempt), ceiling, "attempt \(attempt)")
        }
    }

    func testAttemptsBelowOneCountAsTheFirst() {
        let backoff = Backoff()
        for attempt in [0, -1, -1_000, Int.min] {
            XCTAssertEqual(backoff.ceiling(afterAttempt: attempt), 1, "attempt \(attempt)")
        }
    }

    func testHugeAttemptNumbersSaturateAtCapWithoutOverflow() {
        for backoff in [Backoff(), Backoff(base: 1e-300, cap: 5), Backoff(base: 1e300, cap: 1e308)] {
            for attempt in [1_000, 1_025, 1_100, 1_101, 10_000, Int.max - 1, Int.max] {
                XCTAssertEqual(backoff.ceiling(afterAttempt: attempt), backoff.cap, "attempt \(attempt)")
                var random = SeededGenerator(seed: UInt64(truncatingIfNeeded: attempt))
                let delay = backoff.delay(afterAttempt: attempt, random: &random)
                XCTAssertTrue(delay.isFinite && delay >= 0 && delay <= backoff.cap)
            }
        }
    }

    func testDelaysStayWithinZeroAndTheCeiling() {
        var random = SeededGenerator(seed: 42)
        for backoff in [Backoff(), Backoff(base: 0.5, cap: 10), Backoff(base: 2, cap: 1)] {
            for attempt in 1...40 {
                let ceiling = backoff.ceiling(afterAttempt: attempt)
                XCTAssertLessThanOrEqual(ceiling, backoff.cap)
                for _ in 0..<500 {
                    let delay = backoff.delay(afterAttempt: attempt, random: &random)
                    XCTAssertGreaterThanOrEqual(delay, 0)
                    XCTAssertLessThanOrEqual(delay, ceiling)
                }
            }
        }
    }

    func testJitterIsFullAndUniform() {
        var random = SeededGenerator(seed: 7)
        let backoff = Backoff()
        let samples = (0..<20_000).map { _ in backoff.delay(afterAttempt: 20, random: &random) }
        let mean = samples.reduce(0, +) / Double(samples.count)
        XCTAssertEqual(mean, 150, accuracy: 5, "uniform on 0...300 has mean 150")
        // Full jitter reaches down near zero, not just the upper half (that would be "equal jitter").
        XCTAssertLessThan(samples.min()!, 1)
        XCTAssertGreaterThan(samples.max()!, 299)
        let lowestQuarter = samples.filter { $0 < 75 }.count
        XCTAssertEqual(Double(lowestQuarter) / Double(samples.count), 0.25, accuracy: 0.02)
    }

    func testSameSeedGivesSameDelays() {
        var first = SeededGenerator(seed: 99)
        var second = SeededGenerator(seed: 99)
        let backoff = Backoff()
        for attempt in 1...50 {
            XCTAssertEqual(backoff.delay(afterAttempt: attempt, random: &first),
                           backoff.delay(afterAttempt: attempt, random: &second))
        }
    }

    func testZeroBaseOrCapMeansNoWait() {
        var random = SeededGenerator(seed: 1)
        for backoff in [Backoff(base: 0, cap: 300), Backoff(base: 1, cap: 0), Backoff(base: 0, cap: 0)] {
            for attempt in [1, 2, 50, Int.max] {
                XCTAssertEqual(backoff.ceiling(afterAttempt: attempt), 0)
                XCTAssertEqual(backoff.delay(afterAttempt: attempt, random: &random), 0)
            }
        }
    }

    func testSystemRandomConvenienceStaysInBounds() {
        let backoff = Backoff(base: 1, cap: 30)
        for attempt in 1...20 {
            let delay = backoff.delay(afterAttempt: attempt)
            XCTAssertGreaterThanOrEqual(delay, 0)
            XCTAssertLessThanOrEqual(delay, backoff.ceiling(afterAttempt: attempt))
        }
    }
}
