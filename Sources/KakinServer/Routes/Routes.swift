import HTTPServer
import KakinCore

extension KakinApp {
    /// Every route of the contract's HTTP API v1 that this build serves.
    func registerRoutes(_ r: inout Router) {
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
        return HTTPResponse(status: 200, headers: headers, body: Array(metrics.prometheusText().utf8))
    }
}
