import Foundation
import XCTest
@testable import HaulCore
import HaulTestSupport

/// Whether a lease holder is dead: only a process of this boot and this PID namespace whose pid
/// is gone (or reused) is; anything else counts as alive until its lease expires.
final class ProcessIdentityTests: XCTestCase {
    /// A pid that belongs to no process now: a child that has exited and been reaped.
    private func deadPID() throws -> Int32 {
        let child = try HaulProcess.start(URL(fileURLWithPath: "/bin/true"), [])
        _ = child.wait(timeout: 30)
        XCTAssertNil(ProcessIdentity.startTime(of: child.processIdentifier), "the reaped child's pid is still in use")
        return child.processIdentifier
    }

    func testTheCurrentOwnerNamesBootAndPIDNamespaceAndReadsBack() throws {
        try requireNamespace()
        let namespace = try XCTUnwrap(ProcessIdentity.pidNamespace)
        let owner = ProcessIdentity.current
        XCTAssertEqual(owner.machine, "\(ProcessIdentity.bootID):\(namespace)")
        XCTAssertEqual(owner.pid, getpid())
        XCTAssertEqual(LeaseOwner(owner.description), owner)
        XCTAssertFalse(ProcessIdentity.isDead(owner), "this process judged itself dead")
    }

    /// The namespace this process runs in, or a skip where it cannot be known (then no owner is
    /// ever judged dead: see `testWithoutAKnownNamespaceNoOwnerIsDead`).
    private func requireNamespace() throws {
        guard ProcessIdentity.pidNamespace != nil else { throw XCTSkip("no usable /proc/self/ns/pid here") }
    }

    func testAGoneProcessOfThisBootAndNamespaceIsDead() throws {
        try requireNamespace()
        let pid = try deadPID()
        let owner = LeaseOwner(machine: ProcessIdentity.machine, pid: pid, startTime: 12345)
        XCTAssertTrue(ProcessIdentity.isDead(owner))
    }

    func testAReusedPIDIsDead() throws {
        try requireNamespace()
        // This process's own pid with another start time: the pid now belongs to someone else.
        let owner = LeaseOwner(machine: ProcessIdentity.machine, pid: getpid(),
                               startTime: (ProcessIdentity.startTime(of: getpid()) ?? 0) + 1)
        XCTAssertTrue(ProcessIdentity.isDead(owner))
    }

    /// Containers on one host share the boot id, not their pids: a pid that is free here may be a
    /// live haul in another container. Its jobs must wait for their leases to expire.
    func testAnOwnerInAnotherPIDNamespaceIsNeverJudgedDead() throws {
        try requireNamespace()
        let pid = try deadPID()
        let otherNamespace = LeaseOwner(machine: "\(ProcessIdentity.bootID):1", pid: pid, startTime: 12345)
        XCTAssertFalse(ProcessIdentity.isDead(otherNamespace))
        // Recorded by an older haul, without its namespace: not known to be here, so alive.
        let withoutNamespace = LeaseOwner(machine: ProcessIdentity.bootID, pid: pid, startTime: 12345)
        XCTAssertFalse(ProcessIdentity.isDead(withoutNamespace))
        // Another boot, or another machine.
        let otherBoot = LeaseOwner(machine: "another-boot:\(ProcessIdentity.pidNamespace ?? "1")", pid: pid, startTime: 12345)
        XCTAssertFalse(ProcessIdentity.isDead(otherBoot))
    }

    func testWithoutAKnownNamespaceNoOwnerIsDead() throws {
        let pid = try deadPID()
        let owner = LeaseOwner(machine: ProcessIdentity.bootID, pid: pid, startTime: 12345)
        XCTAssertFalse(ProcessIdentity.isDead(owner, here: ProcessIdentity.bootID, namespaceKnown: false))
        XCTAssertTrue(ProcessIdentity.isDead(owner, here: ProcessIdentity.bootID, namespaceKnown: true),
                      "the same owner, with the namespace known, should be dead: the check above proves nothing")
    }

    func testNamespaceLinksAreParsedStrictly() {
        XCTAssertEqual(ProcessIdentity.namespaceNumber(fromLink: "pid:[4026531836]"), "4026531836")
        for bad in [nil, "", "pid:[]", "net:[4026531836]", "pid:[12a]", "pid:[4026531836", "pid:[١٢]"] {
            XCTAssertNil(ProcessIdentity.namespaceNumber(fromLink: bad), "\(bad ?? "nil")")
        }
    }
}
