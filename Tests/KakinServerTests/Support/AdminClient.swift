import Foundation
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer
import Synchronization

/// A browser-like client of `/admin/`, in-process: keeps cookies, never follows redirects, and reads the
/// form token out of the last page, so tests see every Set-Cookie and Location exactly.
final class AdminClient: Sendable {
    struct Page {
        var status: Int
        var headers: HTTPHeaders
        var text: String
        var json: JSONValue { (try? JSONParser.parse(Array(text.utf8))) ?? .null }
        var location: String? { headers["Location"] }
        var cookies: [String] { headers.values("Set-Cookie") }
    }

    let app: KakinApp
    let state = Mutex<(cookies: [String: String], serial: Int)>(([:], 0))

    init(_ app: KakinApp) { self.app = app }

    var cookies: [String: String] { state.withLock { $0.cookies } }

    func send(_ method: String, _ pathAndQuery: String, form: [(String, String)]? = nil, headers extra: [(String, String)] = [],
              requestId: String? = nil) async -> Page {
        let parts = pathAndQuery.split(separator: "?", maxSplits: 1).map(String.init)
        let query = parts.count > 1 ? parts[1].split(separator: "&").map { item -> (name: String, value: String) in
            let kv = item.split(separator: "=", maxSplits: 1).map(String.init)
            return (kv[0], (kv.count > 1 ? kv[1] : "").removingPercentEncoding ?? "")
        } : []
        var headers = HTTPHeaders()
        let (cookieHeader, serial) = state.withLock { s -> (String, Int) in
            s.serial += 1
            return (s.cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; "), s.serial)
        }
        if !cookieHeader.isEmpty { headers.add("Cookie", cookieHeader) }
        var body: [UInt8] = []
        if let form {
            headers.add("Content-Type", "application/x-www-form-urlencoded")
            body = Array(form.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&").utf8)
        }
        for (k, v) in extra { headers.add(k, v) }
        let request = HTTPRequest(method: method, path: parts[0], rawPath: parts[0], queryItems: query, headers: headers, body: body,
                                  requestId: requestId ?? "req_admin\(serial)", remoteAddress: "127.0.0.1")
        let response = await app.handle(request)
        let page = Page(status: response.status, headers: response.headers, text: String(decoding: response.body, as: UTF8.self))
        state.withLock { s in
            for c in page.cookies {
                let first = c.split(separator: ";")[0]
                let kv = first.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                if c.contains("Max-Age=0") { s.cookies[kv[0]] = nil } else { s.cookies[kv[0]] = kv.count > 1 ? kv[1] : "" }
            }
        }
        return page
    }

    func get(_ path: String, headers: [(String, String)] = []) async -> Page { await send("GET", path, headers: headers) }

    /// Posts a form with the CSRF token of `page` (the page that showed the form).
    func post(_ path: String, _ fields: [(String, String)], from page: Page?, headers: [(String, String)] = []) async -> Page {
        var f = fields
        if let token = page.flatMap({ Self.formToken(in: $0.text) }) { f.append(("csrf", token)) }
        return await send("POST", path, form: f, headers: headers)
    }

    static func formToken(in html: String) -> String? { hiddenValue("csrf", in: html) }

    static func hiddenValue(_ name: String, in html: String) -> String? {
        guard let r = html.range(of: "name=\"\(name)\" value=\"") else { return nil }
        return String(html[r.upperBound...].prefix { $0 != "\"" })
    }

    static func encode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? s
    }
}
