import Foundation

/// What the server's database did, from its `/metrics` counters (issue 26): statements by kind, round trips
/// (PostgreSQL), fsyncs (SQLite), commits and the write bodies in them. The difference over a run, divided by the
/// requests it answered, is a path's count in the budget (`Benchmarks/README.md`, "The budget").
struct DatabaseWork {
    var writeStatements = 0.0
    var readStatements = 0.0
    var controlStatements = 0.0
    var roundTrips = 0.0
    var syncs = 0.0
    var commits = 0.0
    var bodies = 0.0

    init() {}

    init(metrics m: [String: Double]) {
        writeStatements = m["kakin_db_statements_total{kind=\"write\"}"] ?? 0
        readStatements = m["kakin_db_statements_total{kind=\"read\"}"] ?? 0
        controlStatements = m["kakin_db_statements_total{kind=\"transaction_control\"}"] ?? 0
        roundTrips = m["kakin_db_round_trips_total"] ?? 0
        syncs = m["kakin_db_syncs_total"] ?? 0
        commits = m["kakin_db_commit_batch_size_count"] ?? 0
        bodies = m["kakin_db_commit_batch_size_sum"] ?? 0
    }

    static func + (a: DatabaseWork, b: DatabaseWork) -> DatabaseWork { a.combined(with: b, +) }
    static func - (a: DatabaseWork, b: DatabaseWork) -> DatabaseWork { a.combined(with: b, -) }

    private func combined(with other: DatabaseWork, _ op: (Double, Double) -> Double) -> DatabaseWork {
        var r = DatabaseWork()
        r.writeStatements = op(writeStatements, other.writeStatements)
        r.readStatements = op(readStatements, other.readStatements)
        r.controlStatements = op(controlStatements, other.controlStatements)
        r.roundTrips = op(roundTrips, other.roundTrips)
        r.syncs = op(syncs, other.syncs)
        r.commits = op(commits, other.commits)
        r.bodies = op(bodies, other.bodies)
        return r
    }

    var statements: Double { writeStatements + readStatements }

    /// "database per grant: 5.02 statements (5.02 in writes, 0.00 in reads) + 2.10 transaction control; 14.1 writes per
    /// commit, 1.08 fsyncs per commit" (SQLite) or "…; 6.05 round trips" (PostgreSQL), over `requests`.
    func perRequest(_ requests: Int, _ name: String) -> String {
        let n = Double(max(1, requests))
        var line = String(format: "database per %@: %.2f statements (%.2f in writes, %.2f in reads) + %.2f transaction control", name,
                          statements / n, writeStatements / n, readStatements / n, controlStatements / n)
        if commits > 0 { line += String(format: "; %.1f writes per commit", bodies / commits) }
        if roundTrips > 0 { line += String(format: "; %.2f round trips", roundTrips / n) }
        if syncs > 0, commits > 0 { line += String(format: ", %.2f fsyncs per commit (COMMIT's and the checkpoints')", syncs / commits) }
        return line
    }
}

extension KakinServerProcess {
    func databaseWork() throws -> DatabaseWork { DatabaseWork(metrics: try metrics()) }

    /// `body`'s result and what the database did while it ran (two `/metrics` scrapes: a few reads of their own).
    func measuringWork<T>(_ body: () throws -> T) throws -> (result: T, work: DatabaseWork) {
        let before = try databaseWork()
        let result = try body()
        return (result, try databaseWork() - before)
    }
}

extension KakinServerGroup {
    func databaseWork() throws -> DatabaseWork { try servers.map { try $0.databaseWork() }.reduce(DatabaseWork(), +) }
}

extension [DatabaseWork] {
    /// Every run's counts together (counts move little from run to run: their sum over all requests, not a median).
    var total: DatabaseWork { reduce(DatabaseWork(), +) }
}

