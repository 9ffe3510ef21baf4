import Foundation
import KakinCore

/// verify: `kakin verify -` over signed consumable transactions (one JWS per line), against OpenSSL's own
/// ECDSA P-256 verify speed on one core (the arithmetic floor every verifier pays) and Apple's Python
/// library verifying a sample of the same JWS.
///
/// `openssl speed` divides by its user CPU time, so the machine's other load does not show in it; the
/// wall-clock rows do. Hence a row per CPU-second too: on a busy shared machine it is the fair one.
enum VerifyBenchmark {
    static let transactionCount = 20_000
    static let pythonSampleCount = 3_000
    /// The baseline of every "per server CPU-second" figure too: one ES256 verify is the unit of a write's CPU.
    static let opensslName = "openssl speed ecdsap256 verify (1 core)"

    /// One measurement of each, taken back to back.
    struct Repetition {
        var kakinWall: Double
        var kakinPerCPUSecond: Double
        var openssl: Double
        var apple: (wall: Double, perCPUSecond: Double)?
    }

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        var result = BenchResult()
        let transactions = try writeTransactions(workspace)
        let verify = [workspace.kakin.path, "verify", "--root", workspace.rootCertificate.path, "--bundle-id", BenchAppStore.bundleId,
                      "--environment", "Sandbox", "-"]
        let errorLog = workspace.file("verify.stderr")

        // A fast answer that says "invalid" would be no figure at all: every line must verify.
        let answers = workspace.file("verify-answers.jsonl")
        _ = try Subprocess.run(verify, input: transactions, output: .file(answers), errorLog: errorLog)
        let valid = try String(contentsOf: answers, encoding: .utf8).split(separator: "\n").count { $0.hasPrefix(#"{"valid": true"#) }
        result.check("kakin verify: \(BenchResult.grouped(valid)) of \(BenchResult.grouped(transactionCount)) signed transactions valid",
                     valid == transactionCount)

        let python = workspace.packageRoot.appendingPathComponent(".venv/bin/python")
        let hasPython = FileManager.default.isExecutableFile(atPath: python.path)
        var repetitions: [Repetition] = []
        for _ in 0..<options.repetitions {
            let openssl = try opensslVerifyPerSecond(workspace)
            let kakin = try Subprocess.run(verify, input: transactions, output: .discarded, errorLog: errorLog)
            let apple = hasPython ? try appleLibraryVerifyPerSecond(python: python, transactions: transactions, workspace) : nil
            repetitions.append(Repetition(kakinWall: Double(transactionCount) / kakin.seconds,
                                          kakinPerCPUSecond: Double(transactionCount) / kakin.cpuSeconds, openssl: openssl, apple: apple))
        }

        let cores = ProcessInfo.processInfo.activeProcessorCount
        let kakinWall = repetitions.map(\.kakinWall), kakinPerCPUSecond = repetitions.map(\.kakinPerCPUSecond)
        let openssl = repetitions.map(\.openssl)
        result.figures.append(Figure(
            name: "verify: kakin verify - (\(cores) cores, wall clock)", value: median(kakinWall), baselineName: opensslName,
            baselineValue: median(openssl), goal: 0.7,
            details: ["\(BenchResult.grouped(transactionCount)) consumable transactions, one `kakin verify -` process each time (start-up included)",
                      "kakin: \(BenchResult.rates(kakinWall)); openssl (per CPU-second of its own): \(BenchResult.rates(openssl))"]))
        result.figures.append(Figure(
            name: "verify: kakin verify - (per CPU-second)", value: median(kakinPerCPUSecond), baselineName: opensslName,
            baselineValue: median(openssl), goal: 0.7,
            details: ["the same runs, divided by kakin's user + system CPU time; kakin: \(BenchResult.rates(kakinPerCPUSecond))"]))
        let apple = repetitions.compactMap(\.apple)
        if apple.isEmpty {
            result.skipped.append("verify against Apple's Python library: no .venv here (run scripts/setup --with-python)")
        } else {
            result.figures.append(Figure(
                name: "verify: kakin verify - (\(cores) cores, wall clock)", value: median(kakinWall),
                baselineName: "Apple's Python library (1 core)", baselineValue: median(apple.map(\.wall)), goal: 10,
                details: ["SignedDataVerifier.verify_and_decode_signed_transaction, online checks off, the first "
                            + "\(BenchResult.grouped(pythonSampleCount)) of the same JWS: \(BenchResult.rates(apple.map(\.wall)))",
                          String(format: "per CPU-second: kakin %@, Apple's library %@ (%.1f×)", BenchResult.rate(median(kakinPerCPUSecond)),
                                 BenchResult.rate(median(apple.map(\.perCPUSecond))), median(kakinPerCPUSecond) / median(apple.map(\.perCPUSecond)))]))
        }
        return result
    }

    /// `transactions.jws`: one signed consumable transaction per line, all different.
    static func writeTransactions(_ workspace: BenchWorkspace) throws -> URL {
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        var text = ""
        for n in 0..<transactionCount {
            let pack = BenchAppStore.coinPacks[n % BenchAppStore.coinPacks.count]
            text += try workspace.appStore.consumableTransaction(
                id: String(2_000_000_000_000_000 + n), pack: pack, quantity: Int64(1 + n % 3),
                appAccountToken: UUID().uuidString.lowercased(), nowMs: nowMs - Int64(n) * 1000)
            text += "\n"
        }
        let url = workspace.file("transactions.jws")
        try text.write(to: url, atomically: false, encoding: .utf8)
        return url
    }

    /// The verify/s column of `openssl speed -seconds 3 ecdsap256` (one core, per CPU-second of user time).
    static func opensslVerifyPerSecond(_ workspace: BenchWorkspace) throws -> Double {
        let output = try Subprocess.run(["openssl", "speed", "-seconds", "3", "ecdsap256"], errorLog: workspace.file("openssl.stderr")).output
        // " 256 bits ecdsa (nistp256)   0.0000s   0.0001s  27568.1  10274.5"  (sign/s, verify/s last)
        guard let line = output.split(separator: "\n").first(where: { $0.contains("ecdsa (nistp256)") }),
              let verifyPerSecond = line.split(separator: " ").last.flatMap({ Double($0) }) else {
            throw SubprocessFailure(description: "no nistp256 line in openssl speed's output: \(output)")
        }
        return verifyPerSecond
    }

    /// Apple's library over the sample: verifications per wall-clock second and per CPU-second.
    static func appleLibraryVerifyPerSecond(python: URL, transactions: URL, _ workspace: BenchWorkspace) throws -> (wall: Double, perCPUSecond: Double) {
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/python/verify_bench.py")
        let output = try Subprocess.run([python.path, script.path, transactions.path, workspace.rootCertificate.path, BenchAppStore.bundleId,
                                         "\(pythonSampleCount)"], errorLog: workspace.file("python.stderr")).output
        let json = try JSONParser.parse(output)
        guard let verified = json["verified"]?.intValue, verified == pythonSampleCount, let seconds = json["seconds"]?.doubleValue,
              let cpuSeconds = json["cpuSeconds"]?.doubleValue else {
            throw SubprocessFailure(description: "verify_bench.py printed \(output)")
        }
        return (Double(verified) / seconds, Double(verified) / cpuSeconds)
    }
}
