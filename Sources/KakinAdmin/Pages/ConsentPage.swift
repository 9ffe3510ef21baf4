import HTTPServer
import KakinCore
import KakinStorage

extension SupportDesk {
    /// `/admin/consent-rescissions`: the RESCIND_CONSENTs Kakin can't place at a customer yet, because no signed
    /// transaction it stored names their app transaction. Each is placed (and leaves this list) when the first one
    /// arrives, by any path: the app's POST, a notification, a restore.
    public func consentPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            Layout.response(ConsentPage.render(session: session, waiting: try await store.unplacedConsentRescissions(limit: Self.unplacedRescissionsMax)))
        }
    }
}

enum ConsentPage {
    static func render(session: AdminSession, waiting: [ConsentRescission]) -> HTML {
        let rows = waiting.map { r -> HTML in
            """
            <tr><td class="when">\(Fmt.time(r.rescindedAtMs))</td><td class="mono small">\(r.appTransactionId ?? "none sent")</td>\
            <td class="small">\(r.bundleId)<div class="muted">\(r.environment)</div></td><td class="mono small">\(r.notificationUUID)</td></tr>
            """
        }
        let empty: HTML = waiting.isEmpty ? "<p class=\"muted\">None: every RESCIND_CONSENT is placed at its customer.</p>" : .empty
        return Layout.page("Consent rescinded", session: session, """
            <h1>Consent rescinded, not yet placed</h1>
            <section class="card">
            <p class="small muted">A parent or guardian withdrew consent (RESCIND_CONSENT) for an app transaction no stored purchase \
            names yet, so Kakin doesn't know the customer. It is placed — the customer's status shows consentRescinded, with a \
            consent.rescinded event — as soon as a signed transaction naming that app transaction arrives: the app's purchase POST, \
            a notification or a restore. Search the app transaction ID to look for it; newest first, at most \
            \(String(SupportDesk.unplacedRescissionsMax)).</p>
            <div class="scroll"><table><tr><th>rescinded</th><th>app transaction</th><th>app</th><th>notification</th></tr>\(rows)</table></div>\(empty)
            </section>
            """)
    }
}
