import HTTPServer
import KakinCore

extension KakinApp {
    /// Every route of the contract's HTTP API v1 that this build serves.
    func registerRoutes(_ r: inout RouteTable) {
        r.add("GET", "/healthz") { [unowned self] req, p in await self.getHealth(req, p) }
        r.add("GET", "/readyz") { [unowned self] req, p in await self.getReady(req, p) }
        r.add("GET", "/metrics") { [unowned self] req, p in await self.getMetrics(req, p) }
        r.add("GET", "/v1/customers/{customerId}") { [unowned self] req, p in await self.getCustomer(req, p) }
        r.add("POST", "/v1/customers/{customerId}/transactions") { [unowned self] req, p in await self.postTransaction(req, p) }
        r.add("POST", "/v1/customers/{customerId}/restore") { [unowned self] req, p in await self.postRestore(req, p) }
        r.add("POST", "/v1/customers/{customerId}/offers/signatures") { [unowned self] req, p in await self.postOfferSignature(req, p) }
        r.add("POST", "/v1/customers/{customerId}/offers/introductory-eligibility") { [unowned self] req, p in await self.postIntroductoryEligibility(req, p) }
        r.add("GET", "/v1/customers/{customerId}/wallet") { [unowned self] req, p in await self.getWallet(req, p) }
        r.add("POST", "/v1/customers/{customerId}/wallet/spend") { [unowned self] req, p in await self.postSpend(req, p) }
        r.add("POST", "/v1/customers/{customerId}/wallet/grants") { [unowned self] req, p in await self.postGrant(req, p) }
        r.add("GET", "/v1/customers/{customerId}/wallet/ledger") { [unowned self] req, p in await self.getLedger(req, p) }
        r.add("GET", "/v1/recipients/{recipient}/support") { [unowned self] req, p in await self.getRecipientSupport(req, p) }
        r.add("POST", "/v1/notifications/appstore") { [unowned self] req, p in await self.postNotification(req, p) }
        r.add("POST", "/v1/admin/notifications/recover") { [unowned self] req, p in await self.postRecoverNotifications(req, p) }
        r.add("GET", "/v1/admin/ledger/check") { [unowned self] req, p in await self.getLedgerCheck(req, p) }
        r.add("POST", "/v1/admin/subscriptions/{originalTransactionId}/extend") { [unowned self] req, p in await self.postExtendSubscription(req, p) }
        r.add("POST", "/v1/admin/apps/{bundleId}/extend-all") { [unowned self] req, p in await self.postExtendAll(req, p) }
        r.add("GET", "/v1/admin/apps/{bundleId}/extend-all/{productId}/{requestIdentifier}") { [unowned self] req, p in await self.getExtendAllStatus(req, p) }
        r.add("GET", "/v1/admin/customers/{customerId}/events") { [unowned self] req, p in await self.getAdminCustomerEvents(req, p) }
        r.add("GET", "/v1/admin/orders/{orderId}") { [unowned self] req, p in await self.getAdminOrder(req, p) }
        r.add("GET", "/v1/admin/notifications") { [unowned self] req, p in await self.getAdminNotifications(req, p) }
        r.add("POST", "/v1/admin/notifications/{notificationUUID}/replay") { [unowned self] req, p in await self.postAdminReplay(req, p) }
        r.add("GET", "/v1/admin/errors/{requestId}") { [unowned self] req, p in await self.getAdminError(req, p) }
        r.add("GET", "/v1/admin/search") { [unowned self] req, p in await self.getAdminSearch(req, p) }
        r.add("GET", "/v1/admin/reports/unused-balance") { [unowned self] req, p in await self.getUnusedBalance(req, p) }
        r.add("GET", "/admin/") { [unowned self] req, p in await self.desk.homePage(req) }
        r.add("GET", "/admin/assets/admin.css") { [unowned self] req, p in self.desk.stylesheet(req) }
        r.add("GET", "/admin/sign-in") { [unowned self] req, p in await self.desk.signInPage(req) }
        r.add("POST", "/admin/sign-in") { [unowned self] req, p in await self.desk.signIn(req) }
        r.add("POST", "/admin/sign-out") { [unowned self] req, p in await self.desk.signOut(req) }
        r.add("GET", "/admin/search") { [unowned self] req, p in await self.desk.searchPage(req) }
        r.add("GET", "/admin/customers/{customerId}") { [unowned self] req, p in await self.desk.customerPage(req, customerId: p["customerId"] ?? "") }
        r.add("POST", "/admin/customers/{customerId}/grant") { [unowned self] req, p in await self.desk.grant(req, customerId: p["customerId"] ?? "") }
        r.add("POST", "/admin/customers/{customerId}/restore") { [unowned self] req, p in await self.desk.restore(req, customerId: p["customerId"] ?? "") }
        r.add("POST", "/admin/customers/{customerId}/subscriptions/{originalTransactionId}/extend") { [unowned self] req, p in await self.desk.extend(req, customerId: p["customerId"] ?? "", originalTransactionId: p["originalTransactionId"] ?? "") }
        r.add("GET", "/admin/notifications") { [unowned self] req, p in await self.desk.notificationsPage(req) }
        r.add("POST", "/admin/notifications/replay-dead") { [unowned self] req, p in await self.desk.replayDead(req) }
        r.add("POST", "/admin/notifications/{notificationUUID}/replay") { [unowned self] req, p in await self.desk.replay(req, notificationUUID: p["notificationUUID"] ?? "") }
        r.add("GET", "/admin/reports/unused-balance") { [unowned self] req, p in await self.desk.reportPage(req) }
        r.add("GET", "/admin/reports/unused-balance.csv") { [unowned self] req, p in await self.desk.reportCSV(req) }
    }

    func getHealth(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        .json(["status": "ok"], status: 200)
    }

    func getReady(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            try await store.ping()
            return .json(["status": "ready"], status: 200)
        }
    }

    func getMetrics(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        return HTTPResponse(status: 200, headers: headers, body: Array(await metricsText().utf8))
    }
}
