import Foundation
import KakinCore
import KakinTestPostgres
import Testing
@testable import KakinStorage

/// Import jobs (migration 24), on both engines: at most `jobsAtOnceMax` open, one worker at a time under a lease, a
/// row's outcome counted once whoever records it, a cancelled job stays cancelled.
@Suite struct ImportJobStoreTests {
    @Test(arguments: Backend.available) func aJobIsRunByOneWorkerAtATimeAndEachRowCountsOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let jobs = ImportJobStore(store: store)
            let rows = (0..<5).map { (line: $0 + 2, fields: #"{"customerId":"u\#($0)"}"#) }
            try await jobs.create(importId: "imp_a", kind: "balances", dryRun: false, events: false, rows: rows, createdBy: "local", nowMs: 1_000,
                                  jobsAtOnceMax: 2)
            try await jobs.create(importId: "imp_b", kind: "balances", dryRun: true, events: false, rows: rows, createdBy: nil, nowMs: 1_001,
                                  jobsAtOnceMax: 2)
            do {
                try await jobs.create(importId: "imp_c", kind: "balances", dryRun: false, events: false, rows: rows, createdBy: nil, nowMs: 1_002,
                                      jobsAtOnceMax: 2)
                Issue.record("a third open job was accepted")
            } catch let error as KakinError {
                #expect(error.kind == .importsBusy)
            }
            let a = try #require(try await jobs.claim(owner: "w1", nowMs: 2_000, leaseUntilMs: 3_000))
            #expect(a.importId == "imp_a" && a.state == .running && a.rows == 5)
            let b = try #require(try await jobs.claim(owner: "w2", nowMs: 2_000, leaseUntilMs: 3_000))
            #expect(b.importId == "imp_b", "imp_a is leased to w1")
            #expect(try await jobs.claim(owner: "w2", nowMs: 2_500, leaseUntilMs: 3_500) == nil)

            let first = try await jobs.pendingRows("imp_a", limit: 2)
            #expect(first.map(\.line) == [2, 3])
            try await jobs.record("imp_a", [ImportRowOutcome(rowNumber: 0, state: .applied),
                                            ImportRowOutcome(rowNumber: 1, state: .rejected, error: ["code": "invalid_balance"])])
            // w1 dies; w3 takes the job over once the lease ran out, and re-records the same rows: nothing is counted twice.
            let taken = try #require(try await jobs.claim(owner: "w3", nowMs: 3_000, leaseUntilMs: 4_000))
            #expect(taken.importId == "imp_a" && taken.done == 2 && taken.doneAtRunStart == 2)
            #expect(try await !jobs.renew("imp_a", owner: "w1", leaseUntilMs: 5_000), "w1 lost it")
            try await jobs.record("imp_a", [ImportRowOutcome(rowNumber: 0, state: .present), ImportRowOutcome(rowNumber: 2, state: .present)])
            let job = try #require(try await jobs.job("imp_a"))
            #expect([job.done, job.applied, job.alreadyPresent, job.rejected] == [3, 1, 1, 1])
            #expect(try await jobs.pendingRows("imp_a", limit: 10).map(\.rowNumber) == [3, 4])
            #expect(try await jobs.rejects("imp_a", afterRow: nil, limit: 10).map(\.line) == [3])

            let cancelled = try await jobs.cancel("imp_a", nowMs: 3_500)
            #expect(cancelled.state == .cancelled)
            #expect(try await !jobs.renew("imp_a", owner: "w3", leaseUntilMs: 6_000), "a cancelled job stops its worker")
            try await jobs.finish("imp_a", owner: "w3", state: .done, error: nil, nowMs: 3_600)
            #expect(try await jobs.job("imp_a")?.state == .cancelled)
            do {
                _ = try await jobs.cancel("imp_a", nowMs: 3_700)
                Issue.record("an ended job was cancelled again")
            } catch let error as KakinError {
                #expect(error.kind == .importEnded)
            }
            try await jobs.finish("imp_b", owner: "w2", state: .done, error: nil, nowMs: 3_800)
            #expect(try await jobs.jobs(limit: 10).map(\.importId) == ["imp_b", "imp_a"])
        }
    }
}
