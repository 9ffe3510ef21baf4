import Dispatch
import Foundation
import KakinHTTPClient
import Synchronization
import Testing

/// The client's thread waits in a poll only when nothing is queued, and whatever is queued while it waits wakes it.
struct HTTPClientWakeUps {
    /// With no bound on the client's waits (a lost wake-up leaves a request unsent, with nothing to end it but this
    /// test's own bound on each wait, `sendAndWait`'s 60 s, twice the requests' deadline), requests queued one at a time (each finds the thread waiting,
    /// with nothing else to wake it), from many threads at the moments the client's thread goes to wait (each queues its
    /// next as its answer comes in), and from the client's own thread in its callbacks (as the webhook worker does), are
    /// all answered, every one of them by the endpoint.
    ///
    /// The senders are threads, not tasks: a task's next request waits for Swift's cooperative pool (two threads here),
    /// which the full suite shares among every test running beside this one. Sent from tasks, the run at a load of 12
    /// took this test past its time limit (about 2,300 requests in 120 s, every one answered in time); the limit then
    /// cancelled it, and its next requests were answered `cancelled` without being sent: the 66 "never reached the
    /// endpoint". The same happens with a pool kept busy on purpose; the client lost none of them.
    @Test(.timeLimit(.minutes(2))) func everyRequestQueuedWhileTheClientGoesToWaitIsSent() async throws {
        let endpoint = try RawHTTPEndpoint(answerBody: "ok")
        defer { endpoint.close() }
        var options = HTTPClient.Options()
        options.pollWaitMsMax = .max
        let client = HTTPClient(options: options)
        let request = HTTPClient.Request(method: "POST", url: "http://127.0.0.1:\(endpoint.port)/hooks", body: Array("{}".utf8),
                                         timeoutMs: 30_000, answerBytesMax: 16)
        let ok = HTTPClient.Response.answered(status: 200, body: Array("ok".utf8))
        func notOk(_ answers: [HTTPClient.Response]) -> [String: Int] {
            Dictionary(answers.filter { $0 != ok }.map { ("\($0)", 1) }, uniquingKeysWith: +)
        }
        let alone = await onThreads(1) { untilUnanswered(300) { sendAndWait(client, request, chained: 1) } }
        #expect(alone.count == 300)
        #expect(notOk(alone) == [:])
        let (threads, rounds) = (8, 100)
        let answers = await onThreads(threads) {
            untilUnanswered(rounds) { sendAndWait(client, request, chained: 1) + sendAndWait(client, request, chained: 2) }
        }
        #expect(answers.count == threads * rounds * 3)
        #expect(notOk(answers) == [:])
        #expect(endpoint.seen.requests.count == 300 + threads * rounds * 3)
    }
}

/// Runs `body` on `count` threads of their own and answers all their answers once every one returned, without holding a
/// thread of the cooperative pool meanwhile.
private func onThreads(_ count: Int, _ body: @escaping @Sendable () -> [HTTPClient.Response]) async -> [HTTPClient.Response] {
    final class Results: Sendable {
        let values = Mutex<(answers: [HTTPClient.Response], threads: Int)>(([], 0))
    }
    let results = Results()
    return await withCheckedContinuation { (continuation: CheckedContinuation<[HTTPClient.Response], Never>) in
        for _ in 0..<count {
            Thread.detachNewThread {
                let answers = body()
                let all = results.values.withLock { values -> [HTTPClient.Response]? in
                    values.answers += answers
                    values.threads += 1
                    return values.threads == count ? values.answers : nil
                }
                if let all { continuation.resume(returning: all) }
            }
        }
    }
}

/// `rounds` rounds of `round`'s answers, or those until a round that had an answer missing (the rest would wait as long).
private func untilUnanswered(_ rounds: Int, _ round: () -> [HTTPClient.Response]) -> [HTTPClient.Response] {
    var answers: [HTTPClient.Response] = []
    for _ in 0..<rounds {
        let answered = round()
        answers += answered
        if answered.contains(unanswered) { break }
    }
    return answers
}

private let unanswered = HTTPClient.Response.failed(reason: "no answer")

/// Sends `request` from the calling thread, then `chained - 1` more times, each from the previous one's completion on the
/// client's thread, and blocks the calling thread until the last answer. An answer missing after `waitSecondsMax` (a
/// lost wake-up: the client's own deadline never starts for a request it never took) is `unanswered`.
private func sendAndWait(_ client: HTTPClient, _ request: HTTPClient.Request, chained: Int, waitSecondsMax: Int = 60) -> [HTTPClient.Response] {
    final class Chain: Sendable {
        let answers = Mutex<[HTTPClient.Response]>([])
        let done = DispatchSemaphore(value: 0)
    }
    let chain = Chain()
    @Sendable func next() {
        client.send(request) { answer in
            let count = chain.answers.withLock { $0.append(answer); return $0.count }
            if count < chained { next() } else { chain.done.signal() }
        }
    }
    next()
    let answered = chain.done.wait(timeout: .now() + .seconds(waitSecondsMax)) == .success
    let answers = chain.answers.withLock { $0 }
    return answered ? answers : answers + Array(repeating: unanswered, count: chained - answers.count)
}
