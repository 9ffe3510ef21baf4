import Foundation
import HTTPServer
import KakinCore
import KakinCrypto
import Synchronization

/// The receiver behind `kakin events listen`: checks each POST's `Kakin-Signature` against the secrets (400 when it
/// does not verify), fails a seeded share of requests with 500 (to watch Kakin retry), and hands each event it has not
/// printed before to `output` as one line (its JSON). Deduplicated by event id over the last `rememberedMax` events:
/// a redelivery (at least once) is answered 200 and not printed again.
public final class WebhookListener: Sendable {
    public struct Counts: Sendable, Hashable {
        /// Requests with a valid signature.
        public var accepted = 0
        /// Events printed (first deliveries).
        public var printed = 0
        /// Valid deliveries of events already printed.
        public var duplicates = 0
        /// Requests refused with 400 (signature, body).
        public var rejected = 0
        /// Requests failed on purpose (`failRate`).
        public var failed = 0
    }

    private struct State {
        var remembered = Set<String>()
        var order: [String] = []
        var oldest = 0
        var attempts: [String: Int] = [:]
        var counts = Counts()
    }

    let secrets: [[UInt8]]
    let failRate: Double
    let seed: UInt64
    let toleranceSeconds: Int64
    let nowSeconds: @Sendable () -> Int64
    let output: @Sendable (String) -> Void
    private let state = Mutex(State())

    /// - Parameters:
    ///   - secrets: any of them verifies (one `v1=` per secret Kakin signs with).
    ///   - failRate: 0…1, the share of validly signed requests answered 500. Decided per event id and attempt from
    ///     `seed`, so a run fails the same attempts whatever order deliveries arrive in.
    ///   - toleranceSeconds: how far the signature's `t=` may be from now (Stripe's default 300; 0 skips the check).
    ///   - output: gets each new event's JSON as one line (no newline).
    public init(secrets: [[UInt8]], failRate: Double = 0, seed: UInt64 = 1, toleranceSeconds: Int64 = 300,
                nowSeconds: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
                output: @escaping @Sendable (String) -> Void) {
        precondition(!secrets.isEmpty, "a listener checks at least one secret")
        precondition((0...1).contains(failRate), "the fail rate is a share from 0 to 1")
        self.secrets = secrets
        self.failRate = failRate
        self.seed = seed
        self.toleranceSeconds = toleranceSeconds
        self.nowSeconds = nowSeconds
        self.output = output
    }

    public var counts: Counts { state.withLock { $0.counts } }

    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        guard request.method == "POST" else { return Self.answer(405, ["error": "POST one event"]) }
        do {
            try TimestampedSignature.verify(header: request.headers["Kakin-Signature"], body: request.body, secrets: secrets,
                                            nowSeconds: nowSeconds(), toleranceSeconds: toleranceSeconds)
        } catch {
            state.withLock { $0.counts.rejected += 1 }
            return Self.answer(400, ["error": .string("Kakin-Signature does not verify: \(error)")])
        }
        guard let json = try? JSONParser.parse(request.body), let id = json["id"]?.stringValue, !id.isEmpty,
              request.headers["Kakin-Event-Id"] == id else {
            state.withLock { $0.counts.rejected += 1 }
            return Self.answer(400, ["error": "the body is not an event whose id is the Kakin-Event-Id header"])
        }
        let line = json.jsonString
        let outcome = state.withLock { s -> Int in
            s.counts.accepted += 1
            let attempt = (s.attempts[id] ?? 0) + 1
            if s.attempts[id] == nil { remember(id, in: &s) }
            s.attempts[id] = attempt
            if failRate > 0, Self.draw(seed: seed, id: id, attempt: attempt) < failRate {
                s.counts.failed += 1
                return 500
            }
            guard s.remembered.insert(id).inserted else {
                s.counts.duplicates += 1
                return 200
            }
            s.counts.printed += 1
            output(line)
            return 201
        }
        switch outcome {
        case 500: return Self.answer(500, ["error": "failed on purpose (--fail-rate)"])
        default: return Self.answer(200, ["received": true, "duplicate": .bool(outcome == 200)])
        }
    }

    /// Keeps `id`'s attempt count, forgetting the oldest id when full.
    private func remember(_ id: String, in s: inout State) {
        if s.order.count < Self.rememberedMax {
            s.order.append(id)
            return
        }
        let forgotten = s.order[s.oldest]
        s.remembered.remove(forgotten)
        s.attempts[forgotten] = nil
        s.order[s.oldest] = id
        s.oldest = (s.oldest + 1) % Self.rememberedMax
    }

    /// A uniform draw in [0, 1) fixed by the seed, the event id and the attempt (FNV-1a, then SplitMix64).
    static func draw(seed: UInt64, id: String, attempt: Int) -> Double {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in id.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        var random = SeededRandom(seed: h ^ seed ^ (UInt64(attempt) &* 0x9E37_79B9_7F4A_7C15))
        return Double(random.next() >> 11) / Double(1 << 53)
    }

    static func answer(_ status: Int, _ body: JSONValue) -> HTTPResponse {
        .json(body.serialized(), status: status)
    }
}
