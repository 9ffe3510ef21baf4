import HTTPServer
import KakinCore
import KakinService
import KakinStorage

/// `/admin/…`: the pages and forms. Every page needs a session (or local mode); every form POST needs the
/// session's CSRF token; every answer carries the strict Content-Security-Policy (see `Layout`).
extension SupportDesk {
    // MARK: Plumbing

    func page(_ request: HTTPRequest, _ body: (AdminSession) async throws(KakinError) -> HTTPResponse) async -> HTTPResponse {
        guard let session = await session(for: request) else { return Layout.redirect("/admin/sign-in") }
        do throws(KakinError) {
            return try await body(session)
        } catch {
            logError(error, request)
            return Layout.errorPage(error, requestId: request.requestId, session: session)
        }
    }

    func action(_ request: HTTPRequest, _ body: (AdminSession, FormFields) async throws(KakinError) -> HTTPResponse) async -> HTTPResponse {
        guard let session = await session(for: request) else { return Layout.redirect("/admin/sign-in") }
        do throws(KakinError) {
            let form = try FormFields(request)
            guard let token = form["csrf"], Tokens.equal(token, session.csrfToken) else { throw KakinError(.formTokenInvalid) }
            return try await body(session, form)
        } catch {
            logError(error, request)
            return Layout.errorPage(error, requestId: request.requestId, session: session)
        }
    }

    static func notice(_ request: HTTPRequest) -> HTML {
        let count = request.query["count"].flatMap { Int($0) }.map { " (\($0))" } ?? ""
        let text: String
        switch request.query["done"] {
        case "granted": text = "Free coins granted; the timeline records it with your name."
        case "restored": text = "Restored from the App Store; anything missing was applied."
        case "extended": text = "Subscription extended at the App Store; the timeline records it with your name."
        case "replayed": text = "Notification replayed; its state is shown below."
        case "replayedAll": text = "Dead notifications replayed\(count); those whose cause is fixed are applied now."
        default: return .empty
        }
        return "<div class=\"flash\">\(text)</div>"
    }

    static func with(_ path: String, done: String, count: Int? = nil) -> String {
        let (base, anchor) = path.split(separator: "#", maxSplits: 1).map(String.init).splitFirst()
        var s = base + (base.contains("?") ? "&" : "?") + "done=\(done)"
        if let count { s += "&count=\(count)" }
        return s + (anchor.map { "#\($0)" } ?? "")
    }

    // MARK: Pages

    public func homePage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            Layout.response(HomePage.render(session: session, depth: try await store.inboxDepth(), nowMs: clock.nowMs(),
                                            notice: await heldBackWarning()))
        }
    }

    /// A warning naming each reader of the events outbox held back past the events' retention
    /// (`WebhookDeliveryWorker.heldBackCursors`): the events it has not read are kept, so nothing is lost, but the outbox
    /// grows until it catches up. Shown on the home and numbers pages.
    func heldBackWarning() async -> HTML {
        guard let cursors = try? await services.webhooks.heldBackCursors() else { return .empty }
        let held = cursors.filter(\.heldBack).map(\.cursor)
        if held.isEmpty { return .empty }
        let items = held.map { cursor -> HTML in
            cursor == "metrics"
                ? "<li><code>metrics</code>: the business numbers' worker is behind; the numbers miss what it has not read yet.</li>"
                : "<li><code>\(cursor)</code>: events wait to be fanned out to this endpoint.</li>"
        }
        return """
            <div class="problem"><p>Events older than the retention (\(services.webhooks.options.retentionDays) days) are kept, not purged, \
            for readers that have not read them yet (<code>kakin_outbox_cursor_held_back</code>):</p><ul>\(items)</ul>\
            <p>Check that Kakin's workers run and what its log says; the outbox grows until they catch up.</p></div>
            """
    }

    public func signInPage(_ request: HTTPRequest) async -> HTTPResponse {
        if isOpen { return Layout.redirect("/admin/") }
        if await session(for: request) != nil { return Layout.redirect("/admin/") }
        return signInForm(request, problem: nil, status: 200)
    }

    func signInForm(_ request: HTTPRequest, problem: String?, status: Int) -> HTTPResponse {
        let token = Tokens.random()
        return Layout.response(SignInPage.render(formToken: token, problem: problem), status: status,
                               cookies: [cookie(Self.signInCookie, token, maxAgeSeconds: 3600, request: request)])
    }

    public func signIn(_ request: HTTPRequest) async -> HTTPResponse {
        if isOpen { return Layout.redirect("/admin/") }
        do throws(KakinError) {
            let form = try FormFields(request)
            guard let token = form["csrf"], let expected = Cookies.value(Self.signInCookie, in: request), !expected.isEmpty,
                  Tokens.equal(token, expected) else { throw KakinError(.formTokenInvalid) }
            let (sessionToken, session) = try await signIn(name: form["name"] ?? "", key: form["key"] ?? "")
            let lifetime = (session.expiresAtMs - session.createdAtMs) / 1000
            return Layout.redirect("/admin/", cookies: [cookie(Self.sessionCookie, sessionToken, maxAgeSeconds: lifetime, request: request),
                                                        cookie(Self.signInCookie, "", maxAgeSeconds: 0, request: request)])
        } catch {
            logError(error, request)
            return signInForm(request, problem: "\(error.message) (\(error.kind.id))", status: error.httpStatus)
        }
    }

    public func signOut(_ request: HTTPRequest) async -> HTTPResponse {
        await action(request) { _, _ throws(KakinError) in
            await endSession(request)
            return Layout.redirect("/admin/sign-in", cookies: [cookie(Self.sessionCookie, "", maxAgeSeconds: 0, request: request)])
        }
    }

    public func searchPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let q = (request.query["q"] ?? "").trimmingSpaces()
            return Layout.response(SearchPage.render(session: session, outcome: await search(q)))
        }
    }

    public func customerPage(_ request: HTTPRequest, customerId: String) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let view = try await customerView(customerId, ledgerCursor: request.query["ledger"], timelineCursor: request.query["events"])
            return Layout.response(CustomerPage.render(session: session, view: view, notice: Self.notice(request),
                                                       formKey: "adm_" + Tokens.random(), outboxEvents: try await latestOutboxEvents(customerId)))
        }
    }

    public func notificationsPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let (state, items, next) = try await notificationsPage(state: request.query["state"] ?? InboxState.dead.rawValue, limit: nil,
                                                                   cursor: request.query["cursor"])
            return Layout.response(NotificationsPage.render(session: session, state: state, items: items, next: next,
                                                            notice: Self.notice(request)))
        }
    }

    public func reportPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let asOf = request.query["asOf"].flatMap { $0.isEmpty ? nil : $0 }
                ?? ReportingDay.latestBaseDate(nowMs: clock.nowMs(), timeZone: settings.apps.first?.reportingTimeZone ?? ReportingDay.defaultTimeZone)
            let report = try await unusedBalance(asOf: asOf)
            return Layout.response(ReportPage.render(session: session, report: report, asOf: asOf))
        }
    }

    /// The auditor's per-customer CSV. Bounded: past `csvLinesMax` customers, use `kakin report unused-balance`.
    public func reportCSV(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { _ throws(KakinError) in
            let asOf = request.query["asOf"] ?? ""
            let body = try await unusedBalanceCSV(asOf: asOf)
            var headers = HTTPHeaders()
            headers.add("Content-Type", "text/csv; charset=utf-8")
            headers.add("Content-Disposition", "attachment; filename=\"unused-balance-\(asOf).csv\"")
            Layout.securityHeaders(&headers)
            return HTTPResponse(status: 200, headers: headers, body: body)
        }
    }

    /// The per-customer CSV in memory (header line first).
    public func unusedBalanceCSV(asOf: String) async throws(KakinError) -> [UInt8] {
        var out = Array((UnusedBalanceLine.csvHeader + "\n").utf8)
        var count = 0
        let box = CSVBuffer()
        _ = try await unusedBalance(asOf: asOf) { line in box.append(line) }
        for line in box.lines {
            count += 1
            guard count <= Self.csvLinesMax else {
                throw KakinError(.invalidField, "More than \(Self.csvLinesMax) customers hold unused coins; use `kakin report unused-balance --format csv`.")
            }
            out += Array((line.csv + "\n").utf8)
        }
        return out
    }

    public func stylesheet(_ request: HTTPRequest) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/css; charset=utf-8")
        headers.add("X-Content-Type-Options", "nosniff")
        headers.add("Cache-Control", "max-age=3600")
        return HTTPResponse(status: 200, headers: headers, body: Array(Stylesheet.css.utf8))
    }

    // MARK: Actions

    public func grant(_ request: HTTPRequest, customerId: String) async -> HTTPResponse {
        await action(request) { session, form throws(KakinError) in
            guard CustomerID.isValid(customerId) else { throw KakinError(.invalidCustomerID) }
            guard let amount = form["amount"].flatMap({ Int64($0) }), amount >= 1, amount <= WalletRules.amountMax else {
                throw KakinError(.invalidAmount)
            }
            let reason = (form["reason"] ?? "").trimmingSpaces()
            guard !reason.isEmpty, reason.utf8.count <= 255 else { throw KakinError(.invalidField, "The reason must be 1 to 255 characters.") }
            guard let key = form["key"], !key.isEmpty, key.utf8.count <= 255 else { throw KakinError(.idempotencyKeyRequired) }
            _ = try await services.wallets.grant(GrantRequest(customerId: customerId, idempotencyKey: key, amount: amount, reason: reason,
                                                              deskActor: session.actor))
            return Layout.redirect(Self.with(Link.customer(customerId), done: "granted"))
        }
    }

    public func restore(_ request: HTTPRequest, customerId: String) async -> HTTPResponse {
        await action(request) { session, _ throws(KakinError) in
            guard CustomerID.isValid(customerId), try await store.customer(customerId) != nil else { throw KakinError(.customerNotFound) }
            try await services.appStoreSync.restore(customerId: customerId, transactionId: nil, byDesk: session.actor)
            return Layout.redirect(Self.with(Link.customer(customerId), done: "restored"))
        }
    }

    /// Extends one of the customer's subscriptions through the same path as the JSON endpoint; the form's key
    /// (drawn when the page was shown) is Apple's request identifier, so a double submit extends once.
    public func extend(_ request: HTTPRequest, customerId: String, originalTransactionId otid: String) async -> HTTPResponse {
        await action(request) { session, form throws(KakinError) in
            guard CustomerID.isValid(customerId) else { throw KakinError(.invalidCustomerID) }
            guard !otid.isEmpty, otid.utf8.count <= 64, try await store.subscriptionOrigin(originalTransactionId: otid)?.customerId == customerId else {
                throw KakinError(.subscriptionNotFound)
            }
            guard let key = form["key"], !key.isEmpty, key.utf8.count <= 128 else { throw KakinError(.idempotencyKeyRequired) }
            _ = try await services.extensions.extend(otid, days: form["days"].flatMap { Int64($0) }.map(JSONValue.int),
                                                     reason: .string(form["reason"] ?? ""), requestIdentifier: key, actor: session.actor)
            return Layout.redirect(Self.with(Link.customer(customerId, anchor: "sub-\(otid)"), done: "extended"))
        }
    }

    public func replay(_ request: HTTPRequest, notificationUUID uuid: String) async -> HTTPResponse {
        await action(request) { session, form throws(KakinError) in
            let n = try await replay(notificationUUID: uuid, actor: session.actor)
            let back = Link.safeBack(form["back"]) ?? Link.notifications(n.state)
            return Layout.redirect(Self.with(back, done: "replayed"))
        }
    }

    public func replayDead(_ request: HTTPRequest) async -> HTTPResponse {
        await action(request) { session, _ throws(KakinError) in
            let count = try await services.notifications.replayDead(actor: session.actor, limit: Limits.replayAllMax)
            return Layout.redirect(Self.with(Link.notifications(.dead), done: "replayedAll", count: count))
        }
    }
}

/// Collects CSV lines from the report's synchronous callback.
final class CSVBuffer: @unchecked Sendable {
    var lines: [UnusedBalanceLine] = []
    func append(_ line: UnusedBalanceLine) { lines.append(line) }
}

extension Array where Element == String {
    /// (first, second?) of a one- or two-element split.
    func splitFirst() -> (String, String?) { (first ?? "", count > 1 ? self[1] : nil) }
}

/// An `application/x-www-form-urlencoded` body (forms post nothing else), bounded.
public struct FormFields {
    var fields: [String: String] = [:]

    init(_ request: HTTPRequest) throws(KakinError) {
        let type = request.headers["Content-Type"]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else { throw KakinError(.unsupportedMediaType, "The form must be sent as application/x-www-form-urlencoded.") }
        guard request.body.count <= Self.bodyBytesMax else { throw KakinError(.bodyTooLarge) }
        let text = String(decoding: request.body, as: UTF8.self)
        for pair in text.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = URLText.decodeForm(kv[0]), let value = URLText.decodeForm(kv.count > 1 ? kv[1] : "") else {
                throw KakinError(.invalidField, "The form is not valid URL-encoded text.")
            }
            fields[name] = value
        }
    }

    subscript(_ name: String) -> String? { fields[name] }
}
