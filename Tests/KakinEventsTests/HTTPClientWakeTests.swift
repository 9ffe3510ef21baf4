import KakinHTTPClient
import Testing

/// The client's thread waits in a poll only when nothing is queued, and whatever is queued while it waits wakes it.
struct HTTPClientWakeUps {
    /// With no bound on a wait (a lost wake-up would hang this test until its time limit), requests queued one at a
    /// time (each finds the thread waiting, with nothing else to wake it), from many tasks at the moments the thread
    /// goes to wait (each queues its next as its answer comes in), and from the client's own thread in its callbacks
    /// (as the webhook worker does), all end.
    @Test(.timeLimit(.minutes(2))) func everyRequestQueuedWhileTheClientGoesToWaitIsSent() async throws {
        let endpoint = try RawHTTPEndpoint(answerBody: "ok")
        defer { endpoint.close() }
        var options = HTTPClient.Options()
        options.pollWaitMsMax = .max
        let client = HTTPClient(options: options)
        let request = HTTPClient.Request(method: "POST", url: "http://127.0.0.1:\(endpoint.port)/hooks", body: Array("{}".utf8),
                                         timeoutMs: 60_000, answerBytesMax: 16)
        let ok = HTTPClient.Response.answered(status: 200, body: Array("ok".utf8))
        var alone = 0
        for _ in 0..<300 where await client.send(request) == ok { alone += 1 }
        #expect(alone == 300)
        let (tasks, rounds) = (8, 100)
        let answered = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<tasks {
                group.addTask {
                    var answered = 0
                    for _ in 0..<rounds {
                        if await client.send(request) == ok { answered += 1 }
                        let chained = await withCheckedContinuation { (c: CheckedContinuation<[HTTPClient.Response], Never>) in
                            client.send(request) { first in client.send(request) { second in c.resume(returning: [first, second]) } }
                        }
                        answered += chained.filter { $0 == ok }.count
                    }
                    return answered
                }
            }
            return await group.reduce(0, +)
        }
        #expect(answered == tasks * rounds * 3)
        #expect(endpoint.seen.requests.count == 300 + tasks * rounds * 3)
    }
}
