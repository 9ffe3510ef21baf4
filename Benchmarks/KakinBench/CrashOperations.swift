import Foundation
import KakinCore

struct Coins: Sendable, Hashable {
    var paid: Int64
    var free: Int64
}

/// What a client heard back for one request.
enum LoadAnswer: Sendable, CustomStringConvertible {
    /// 201, with its body.
    case created([UInt8])
    /// Any other complete answer.
    case answered(status: Int, code: String?)
    /// No answer: the server died (or the connection broke) while the request was out.
    case inFlight

    init(_ send: () throws(HTTPTransportError) -> HTTPAnswer) {
        do {
            let answer = try send()
            self = answer.status == 201 ? .created(answer.body) : .answered(status: answer.status, code: answer.errorCode)
        } catch {
            self = .inFlight
        }
    }

    var description: String {
        switch self {
        case .created: "201"
        case .answered(let status, let code): "\(status) \(code ?? "")"
        case .inFlight: "no answer"
        }
    }
}

/// One operation a crash-test client attempted.
enum CrashOperation: Sendable {
    case purchase(customer: String, transactionId: String, jws: String, coins: Coins, answer: LoadAnswer)
    case spend(customer: String, key: String, amount: Int64, body: [UInt8], answer: LoadAnswer)
}

/// One client of the crash test: on its own customers, buys a coin pack, then spends some coins once or
/// twice, until the server stops answering or the test says stop.
struct CrashClient {
    let client: Int
    let round: Int
    let port: Int
    let appStore: BenchAppStore
    let transactionIds: TransactionIDs

    func run(until stop: StopFlag) -> [CrashOperation] {
        let connection = HTTPConnection(port: port)
        var operations: [CrashOperation] = []
        var spends = 0
        while !stop.isSet {
            let customer = "crash-c\(client)-\(Int.random(in: 0..<CrashTest.customersPerClient))"
            let pack = BenchAppStore.coinPacks.randomElement()!
            let quantity = Int64.random(in: 1...2)
            let transactionId = transactionIds.next()
            let jws: String
            do {
                jws = try appStore.consumableTransaction(id: transactionId, pack: pack, quantity: quantity, appAccountToken: nil,
                                                         nowMs: Int64(Date().timeIntervalSince1970 * 1000))
            } catch {
                fatalError("crash-test: signing a transaction failed: \(error)")
            }
            let bought = LoadAnswer { () throws(HTTPTransportError) in
                try connection.request("POST", "/v1/customers/\(customer)/transactions", json: ["signedTransaction": .string(jws)])
            }
            operations.append(.purchase(customer: customer, transactionId: transactionId, jws: jws,
                                        coins: Coins(paid: pack.coins * quantity, free: pack.bonusCoins * quantity), answer: bought))
            if case .inFlight = bought { return operations }

            for _ in 0..<Int.random(in: 1...2) {
                spends += 1
                let key = "crash-r\(round)-c\(client)-\(spends)"
                let amount = Int64.random(in: 1...250)
                let body = JSONValue.object(["amount": .int(amount), "item": "stamp.heart",
                                             "recipient": .string("program:\(Int.random(in: 1...5))")]).serialized()
                let spent = LoadAnswer { () throws(HTTPTransportError) in
                    try connection.request("POST", "/v1/customers/\(customer)/wallet/spend", body: body, headers: ["Idempotency-Key": key])
                }
                operations.append(.spend(customer: customer, key: key, amount: amount, body: body, answer: spent))
                if case .inFlight = spent { return operations }
            }
        }
        return operations
    }
}

/// What replaying or retrying an operation after the restart proved.
struct Settled: Sendable {
    /// The ledger entry the operation must have made.
    enum Effect: Sendable {
        case none
        case purchase(customer: String, transactionId: String, coins: Coins)
        case spend(customer: String, spendId: String, amount: Int64)
    }

    enum DuringLoad: Sendable {
        case acknowledgedPurchase, acknowledgedSpend, refusedSpend
        /// No answer before the kill. `hadCommitted`: the retry found it done before (409 / replayed);
        /// nil when the retry did not tell.
        case inFlight(hadCommitted: Bool?)
        /// An answer no correct server gives (a violation of its own).
        case unexpectedAnswer
    }

    var duringLoad: DuringLoad
    var effect: Effect
    var violations: [String] = []
}

extension CrashOperation {
    /// Replays an acknowledged operation (it must answer as already done, changing nothing) or retries
    /// one without a 201 (as a client retries at launch: it either had committed, or commits now).
    func settle(_ connection: HTTPConnection) -> Settled {
        switch self {
        case .purchase(let customer, let transactionId, let jws, let coins, let answer):
            settlePurchase(customer, transactionId, jws, coins, answer, connection)
        case .spend(let customer, let key, let amount, let body, let answer):
            settleSpend(customer, key, amount, body, answer, connection)
        }
    }

    private func settlePurchase(_ customer: String, _ transactionId: String, _ jws: String, _ coins: Coins, _ answer: LoadAnswer,
                                _ connection: HTTPConnection) -> Settled {
        let effect = Settled.Effect.purchase(customer: customer, transactionId: transactionId, coins: coins)
        var settled = Settled(duringLoad: .acknowledgedPurchase, effect: effect)
        switch answer {
        case .created: break
        case .inFlight: settled.duringLoad = .inFlight(hadCommitted: nil)
        case .answered(let status, let code):
            settled.duringLoad = .unexpectedAnswer
            settled.violations.append("purchase \(transactionId) answered \(status) \(code ?? "") during the load; a new one must be 201")
        }
        let retry = LoadAnswer { () throws(HTTPTransportError) in
            try connection.request("POST", "/v1/customers/\(customer)/transactions", json: ["signedTransaction": .string(jws)])
        }
        switch (answer, retry) {
        case (.created, .answered(409, "already_processed")):
            break
        case (.created, _):
            settled.violations.append("acknowledged purchase \(transactionId) re-POSTed after the restart: \(retry), not 409 already_processed")
        case (_, .created), (_, .answered(409, "already_processed")):
            let hadCommitted = if case .answered = retry { true } else { false }
            if case .inFlight = answer { settled.duringLoad = .inFlight(hadCommitted: hadCommitted) }
        default:
            settled.violations.append("purchase \(transactionId) without a 201 retried after the restart: \(retry)")
            settled.effect = .none
        }
        return settled
    }

    private func settleSpend(_ customer: String, _ key: String, _ amount: Int64, _ body: [UInt8], _ answer: LoadAnswer,
                             _ connection: HTTPConnection) -> Settled {
        var settled = Settled(duringLoad: .inFlight(hadCommitted: nil), effect: .none)
        let retry: HTTPAnswer
        do {
            retry = try connection.request("POST", "/v1/customers/\(customer)/wallet/spend", body: body, headers: ["Idempotency-Key": key])
        } catch {
            settled.violations.append("spend \(key) replayed after the restart: \(error)")
            if case .created(let first) = answer {
                settled.duringLoad = .acknowledgedSpend
                settled.effect = Self.spendEffect(customer, first, amount)
            }
            return settled
        }
        let replayed = retry.headers["idempotent-replayed"] == "true"
        switch answer {
        case .created(let first):
            settled.duringLoad = .acknowledgedSpend
            settled.effect = Self.spendEffect(customer, first, amount)
            if !(retry.status == 201 && replayed && retry.body == first) {
                settled.violations.append("acknowledged spend \(key) replayed after the restart: \(retry.status), replayed \(replayed), "
                                          + "same body \(retry.body == first)")
            }
        case .answered(409, "insufficient_balance"):
            settled.duringLoad = .refusedSpend
            if !(retry.status == 409 && replayed) {
                settled.violations.append("refused spend \(key) replayed after the restart: \(retry.status), replayed \(replayed)")
            }
        case .answered, .inFlight:
            if case .answered(let status, let code) = answer {
                settled.duringLoad = .unexpectedAnswer
                settled.violations.append("spend \(key) answered \(status) \(code ?? "") during the load")
            } else {
                settled.duringLoad = .inFlight(hadCommitted: replayed)
            }
            switch (retry.status, retry.errorCode) {
            case (201, _): settled.effect = Self.spendEffect(customer, retry.body, amount)
            case (409, "insufficient_balance"): break
            default: settled.violations.append("spend \(key) without a 201 retried after the restart: \(retry.status) \(retry.errorCode ?? "")")
            }
        }
        return settled
    }

    private static func spendEffect(_ customer: String, _ body: [UInt8], _ amount: Int64) -> Settled.Effect {
        let spendId = (try? JSONParser.parse(body))?["spendId"]?.stringValue ?? "(no spendId in \(String(decoding: body, as: UTF8.self)))"
        return .spend(customer: customer, spendId: spendId, amount: amount)
    }
}

/// What every customer's ledger must hold: one entry per settled purchase and spend, and nothing else.
struct ExpectedLedger {
    /// customer → transactionId → coins credited.
    private var purchases: [String: [String: Coins]] = [:]
    /// customer → spendId → coins spent.
    private var spends: [String: [String: Int64]] = [:]

    var customers: [String] { Set(purchases.keys).union(spends.keys).sorted() }

    mutating func add(_ effect: Settled.Effect) {
        switch effect {
        case .none: break
        case .purchase(let customer, let transactionId, let coins): purchases[customer, default: [:]][transactionId] = coins
        case .spend(let customer, let spendId, let amount): spends[customer, default: [:]][spendId] = amount
        }
    }

    func compare(customer: String, entries: [LedgerEntryRead]) -> [String] {
        var violations: [String] = []
        var seen = Set<String>()
        for entry in entries {
            guard seen.insert("\(entry.kind):\(entry.reference)").inserted else {
                violations.append("\(customer): \(entry.kind) \(entry.reference) is in the ledger more than once")
                continue
            }
            switch entry.kind {
            case "purchase":
                guard let coins = purchases[customer]?[entry.reference] else {
                    violations.append("\(customer): purchase entry \(entry.reference) that no client attempted")
                    continue
                }
                if coins != Coins(paid: entry.paid, free: entry.free) {
                    violations.append("\(customer): purchase \(entry.reference) credited \(entry.paid)+\(entry.free), expected \(coins.paid)+\(coins.free)")
                }
            case "spend":
                guard let amount = spends[customer]?[entry.reference] else {
                    violations.append("\(customer): spend entry \(entry.reference) that no client attempted")
                    continue
                }
                if entry.paid + entry.free != -amount {
                    violations.append("\(customer): spend \(entry.reference) moved \(entry.paid)+\(entry.free), expected -\(amount)")
                }
            default:
                violations.append("\(customer): \(entry.kind) entry \(entry.reference) that no client attempted")
            }
        }
        for transactionId in (purchases[customer] ?? [:]).keys where !seen.contains("purchase:\(transactionId)") {
            violations.append("\(customer): purchase \(transactionId) is missing from the ledger")
        }
        for spendId in (spends[customer] ?? [:]).keys where !seen.contains("spend:\(spendId)") {
            violations.append("\(customer): spend \(spendId) is missing from the ledger")
        }
        return violations
    }
}

/// Counts for one round, or for the whole run.
struct RoundSummary: CustomStringConvertible {
    var acknowledgedPurchases = 0
    var acknowledgedSpends = 0
    var refusedSpends = 0
    var inFlight = 0
    var inFlightCommitted = 0
    var unexpectedAnswers = 0

    mutating func add(_ settled: Settled) {
        switch settled.duringLoad {
        case .acknowledgedPurchase: acknowledgedPurchases += 1
        case .acknowledgedSpend: acknowledgedSpends += 1
        case .refusedSpend: refusedSpends += 1
        case .inFlight(let hadCommitted):
            inFlight += 1
            if hadCommitted == true { inFlightCommitted += 1 }
        case .unexpectedAnswer: unexpectedAnswers += 1
        }
    }

    mutating func merge(_ other: RoundSummary) {
        acknowledgedPurchases += other.acknowledgedPurchases
        acknowledgedSpends += other.acknowledgedSpends
        refusedSpends += other.refusedSpends
        inFlight += other.inFlight
        inFlightCommitted += other.inFlightCommitted
        unexpectedAnswers += other.unexpectedAnswers
    }

    var description: String {
        let acknowledged = acknowledgedPurchases + acknowledgedSpends
        return "\(BenchResult.grouped(acknowledged)) acknowledged and verified (\(BenchResult.grouped(acknowledgedPurchases)) purchases, "
            + "\(BenchResult.grouped(acknowledgedSpends)) spends), \(BenchResult.grouped(refusedSpends)) spends refused (insufficient balance), "
            + "\(inFlight) in flight at the kill (\(inFlightCommitted) had committed, \(inFlight - inFlightCommitted) had not)"
            + (unexpectedAnswers > 0 ? ", \(unexpectedAnswers) UNEXPECTED answers" : "")
    }
}
