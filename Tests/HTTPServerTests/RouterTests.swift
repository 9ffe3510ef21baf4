import HTTPServer
import Testing

/// The router in-process: no socket, requests built directly.
@Suite struct RouterTests {
    private func answer(_ router: Router, _ method: String, _ rawPath: String) async -> HTTPResponse {
        await router.handle(
            HTTPRequest(method: method, path: rawPath, rawPath: rawPath),
            notFound: { _ in .text("404", status: 404) },
            methodNotAllowed: { _, allowed in .text("405 " + allowed.joined(separator: ","), status: 405) })
    }

    private func text(_ response: HTTPResponse) -> String {
        String(decoding: response.body, as: UTF8.self)
    }

    @Test func literalSegmentsBeatParametersWhateverTheRegistrationOrder() async {
        var router = Router()
        router.add("GET", "/v1/customers/{customerId}") { _, parameters in .text("id " + parameters["customerId"]!) }
        router.add("GET", "/v1/customers/me") { _, _ in .text("me") }
        #expect(text(await answer(router, "GET", "/v1/customers/me")) == "me")
        #expect(text(await answer(router, "GET", "/v1/customers/cus_1")) == "id cus_1")
    }

    @Test func parametersAreDecodedPerSegment() async {
        var router = Router()
        router.add("GET", "/files/{name}/meta") { _, parameters in .text(parameters["name"]!) }
        #expect(text(await answer(router, "GET", "/files/a%2Fb%20c/meta")) == "a/b c")
        #expect(await answer(router, "GET", "/files/a/b/meta").status == 404)
    }

    @Test func trailingCatchAllCapturesTheRest() async {
        var router = Router()
        router.add("POST", "/simulator/{rest...}") { _, parameters in .text("[" + parameters["rest"]! + "]") }
        router.add("POST", "/simulator/clock") { _, _ in .text("clock") }
        #expect(text(await answer(router, "POST", "/simulator/a/b%20c/d")) == "[a/b c/d]")
        #expect(text(await answer(router, "POST", "/simulator")) == "[]")
        #expect(text(await answer(router, "POST", "/simulator/clock")) == "clock")
        #expect(text(await answer(router, "POST", "/simulator/clock/x")) == "[clock/x]")
    }

    @Test func wrongMethodListsAllowedMethodsOfEveryMatchingPattern() async {
        var router = Router()
        router.add("GET", "/v1/items/{id}") { _, _ in .text("get") }
        router.add("PUT", "/v1/items/special") { _, _ in .text("put special") }
        let response = await answer(router, "DELETE", "/v1/items/special")
        #expect(response.status == 405)
        #expect(response.headers["allow"] == "GET, HEAD, PUT")
        // A less specific pattern answers a method the more specific one lacks.
        #expect(text(await answer(router, "GET", "/v1/items/special")) == "get")
    }

    @Test func headFallsBackToGet() async {
        var router = Router()
        router.add("GET", "/healthz") { _, _ in .text("ok") }
        #expect(text(await answer(router, "HEAD", "/healthz")) == "ok")
    }

    @Test func emptySegmentsAreIgnoredAndUnknownPathsAre404() async {
        var router = Router()
        router.add("GET", "/a/b") { _, _ in .text("ab") }
        #expect(text(await answer(router, "GET", "//a//b/")) == "ab")
        #expect(await answer(router, "GET", "/a").status == 404)
        #expect(await answer(router, "GET", "/a/b/c").status == 404)
        #expect(await answer(router, "GET", "/a/%zz").status == 404)
    }
}

@Suite struct HTTPHeadersTests {
    @Test func lookupIsCaseInsensitiveAndKeepsOrderAndRepeats() {
        var headers: HTTPHeaders = ["Set-Cookie": "a=1"]
        headers.add("set-cookie", "b=2")
        headers.add("Content-Type", "text/plain")
        #expect(headers["SET-COOKIE"] == "a=1")
        #expect(headers.values("Set-Cookie") == ["a=1", "b=2"])
        headers.set("SET-cookie", "c=3")
        #expect(headers.values("set-cookie") == ["c=3"])
        #expect(headers.map(\.name) == ["Content-Type", "SET-cookie"])
        headers.remove("content-type")
        #expect(headers["Content-Type"] == nil)
        #expect(headers.count == 1)
    }
}
