import HTTPServer
import KakinCore
import KakinService

extension KakinApp {
    /// Every route of the contract's HTTP API v1 that this build serves, with the access each one needs.
    func registerRoutes(_ r: inout RouteTable) {
        r.add("GET", "/healthz", .open) { _ in .json(["status": "ok"], status: 200) }
        r.add("GET", "/readyz", .open) { [unowned self] _ throws(KakinError) in
            try await store.ping()
            return .json(["status": "ready"], status: 200)
        }
        r.add("GET", "/metrics", .open) { [unowned self] _ in await metricsResponse() }
        registerMetricsRoutes(&r)  // business numbers (MetricsRoutes.swift)

        // Customers, purchases, restore (PurchaseRoutes.swift)
        r.add("GET", "/v1/customers/{customerId}", .customer) { [unowned self] c throws(KakinError) in
            .jsonBytes(try await services.statusReads.status(c.customerId).answerJSON)
        }
        r.add("POST", "/v1/customers/{customerId}/transactions", .customer) { [unowned self] c throws(KakinError) in try await postTransaction(c) }
        r.add("POST", "/v1/customers/{customerId}/restore", .customer) { [unowned self] c throws(KakinError) in try await postRestore(c) }

        // Offers (OfferRoutes.swift)
        r.add("POST", "/v1/customers/{customerId}/offers/signatures", .customer) { [unowned self] c throws(KakinError) in try await postOfferSignature(c) }
        r.add("POST", "/v1/customers/{customerId}/offers/introductory-eligibility", .customer) { [unowned self] c throws(KakinError) in
            try await postIntroductoryEligibility(c)
        }

        // Wallet (WalletRoutes.swift)
        r.add("GET", "/v1/customers/{customerId}/wallet", .customer) { [unowned self] c throws(KakinError) in
            .json(try await services.wallets.balance(c.customerId).json, status: 200)
        }
        r.add("POST", "/v1/customers/{customerId}/wallet/spend", .customer) { [unowned self] c throws(KakinError) in try await postSpend(c) }
        r.add("POST", "/v1/customers/{customerId}/wallet/grants", .backend) { [unowned self] c throws(KakinError) in try await postGrant(c) }
        r.add("GET", "/v1/customers/{customerId}/wallet/ledger", .customer) { [unowned self] c throws(KakinError) in try await getLedger(c) }
        r.add("GET", "/v1/recipients/{recipient}/support", .backend) { [unowned self] c throws(KakinError) in try await getRecipientSupport(c) }
        r.add("GET", "/v1/admin/ledger/check", .admin) { [unowned self] _ throws(KakinError) in
            let report = try await services.wallets.checkLedger()
            return .json(report.json, status: report.ok ? 200 : 500)
        }

        // Notifications (NotificationRoutes.swift)
        r.add("POST", "/v1/notifications/appstore", .open) { [unowned self] c throws(KakinError) in try await postNotification(c) }
        // Open: the OIDC bearer Pub/Sub signs is the credential (checked against the app's `rtdn`).
        r.add("POST", "/v1/notifications/googleplay", .open) { [unowned self] c throws(KakinError) in try await postGooglePlayNotification(c) }
        r.add("POST", "/v1/admin/notifications/recover", .admin) { [unowned self] _ throws(KakinError) in
            let (read, new) = try await services.appStoreSync.recoverMissedNotifications()
            await services.notifications.drain()
            return .json(["read": .int(Int64(read)), "new": .int(Int64(new))], status: 200)
        }

        // Apple's realtime calls: Get Retention Message (AppleRealtimeRoutes.swift)
        registerAppleRealtimeRoutes(&r)

        // Events out (EventRoutes.swift)
        r.add("GET", "/v1/events", .backend) { [unowned self] c throws(KakinError) in try await getEvents(c) }
        r.add("GET", "/v1/customers/{customerId}/events", .customer) { [unowned self] c throws(KakinError) in try await getCustomerEvents(c) }
        r.add("GET", "/v1/admin/webhooks", .admin) { [unowned self] c throws(KakinError) in try await getWebhooks(c) }
        r.add("GET", "/v1/admin/webhooks/{id}/deliveries", .admin) { [unowned self] c throws(KakinError) in try await getWebhookDeliveries(c) }
        r.add("POST", "/v1/admin/webhooks/{id}/replay", .admin) { [unowned self] c throws(KakinError) in try await postWebhookReplay(c) }

        // Purchases outside the App Store: the generic source, Stripe, Apple's external purchase tokens (ExternalRoutes.swift)
        registerExternalRoutes(&r)

        // Offerings, placements, experiments and their results; customer attributes (OfferingRoutes.swift)
        registerOfferingRoutes(&r)
        // Imports: moving in an existing app's customers, purchases and balances (ImportRoutes.swift)
        registerImportRoutes(&r)

        // Renewal-date extensions (ExtensionRoutes.swift)
        r.add("POST", "/v1/admin/subscriptions/{originalTransactionId}/extend", .admin) { [unowned self] c throws(KakinError) in
            try await postExtendSubscription(c)
        }
        r.add("POST", "/v1/admin/apps/{bundleId}/extend-all", .admin) { [unowned self] c throws(KakinError) in try await postExtendAll(c) }
        r.add("GET", "/v1/admin/apps/{bundleId}/extend-all/{productId}/{requestIdentifier}", .admin) { [unowned self] c throws(KakinError) in
            try await getExtendAllStatus(c)
        }

        // The support desk's JSON reads and actions (AdminRoutes.swift), and its pages (KakinAdmin).
        r.add("GET", "/v1/admin/customers/{customerId}/events", .adminRead) { [unowned self] c throws(KakinError) in try await getAdminCustomerEvents(c) }
        r.add("GET", "/v1/admin/orders/{orderId}", .adminRead) { [unowned self] c throws(KakinError) in
            .json(try await desk.orderJSON(orderId: c["orderId"]), status: 200)
        }
        r.add("GET", "/v1/admin/notifications", .adminRead) { [unowned self] c throws(KakinError) in try await getAdminNotifications(c) }
        r.add("POST", "/v1/admin/notifications/{notificationUUID}/replay", .admin) { [unowned self] c throws(KakinError) in
            .json(try await desk.replayJSON(notificationUUID: c["notificationUUID"], actor: apiActor(c.request)), status: 200)
        }
        r.add("GET", "/v1/admin/errors/{requestId}", .adminRead) { [unowned self] c throws(KakinError) in
            .json(try await desk.errorsJSON(requestId: c["requestId"]), status: 200)
        }
        r.add("GET", "/v1/admin/search", .adminRead) { [unowned self] c in .json(await desk.search(c.request.query["q"] ?? "").json, status: 200) }
        r.add("GET", "/v1/admin/reports/unused-balance", .adminRead) { [unowned self] c throws(KakinError) in try await getUnusedBalance(c) }
        r.add("GET", "/admin/", .desk) { [unowned self] c in await desk.homePage(c.request) }
        r.add("GET", "/admin/assets/admin.css", .desk) { [unowned self] c in desk.stylesheet(c.request) }
        r.add("GET", "/admin/sign-in", .desk) { [unowned self] c in await desk.signInPage(c.request) }
        r.add("POST", "/admin/sign-in", .desk) { [unowned self] c in await desk.signIn(c.request) }
        r.add("POST", "/admin/sign-out", .desk) { [unowned self] c in await desk.signOut(c.request) }
        r.add("GET", "/admin/search", .desk) { [unowned self] c in await desk.searchPage(c.request) }
        r.add("GET", "/admin/customers/{customerId}", .desk) { [unowned self] c in await desk.customerPage(c.request, customerId: c["customerId"]) }
        r.add("POST", "/admin/customers/{customerId}/grant", .desk) { [unowned self] c in await desk.grant(c.request, customerId: c["customerId"]) }
        r.add("POST", "/admin/customers/{customerId}/restore", .desk) { [unowned self] c in await desk.restore(c.request, customerId: c["customerId"]) }
        r.add("POST", "/admin/customers/{customerId}/subscriptions/{originalTransactionId}/extend", .desk) { [unowned self] c in
            await desk.extend(c.request, customerId: c["customerId"], originalTransactionId: c["originalTransactionId"])
        }
        r.add("GET", "/admin/notifications", .desk) { [unowned self] c in await desk.notificationsPage(c.request) }
        r.add("POST", "/admin/notifications/replay-dead", .desk) { [unowned self] c in await desk.replayDead(c.request) }
        r.add("POST", "/admin/notifications/{notificationUUID}/replay", .desk) { [unowned self] c in
            await desk.replay(c.request, notificationUUID: c["notificationUUID"])
        }
        r.add("GET", "/admin/webhooks", .desk) { [unowned self] c in await desk.webhooksPage(c.request) }
        r.add("GET", "/admin/webhooks/{id}", .desk) { [unowned self] c in await desk.webhookPage(c.request, id: c["id"]) }
        r.add("POST", "/admin/webhooks/{id}/replay-dead", .desk) { [unowned self] c in await desk.replayDeadWebhookDeliveries(c.request, id: c["id"]) }
        r.add("POST", "/admin/webhooks/{id}/deliveries/{eventId}/replay", .desk) { [unowned self] c in
            await desk.replayWebhookDelivery(c.request, id: c["id"], eventId: c["eventId"])
        }
        r.add("GET", "/admin/imports", .desk) { [unowned self] c in await desk.importsPage(c.request) }
        r.add("GET", "/admin/imports/{importId}", .desk) { [unowned self] c in await desk.importPage(c.request, id: c["importId"]) }
        r.add("GET", "/admin/reports/unused-balance", .desk) { [unowned self] c in await desk.reportPage(c.request) }
        r.add("GET", "/admin/consent-rescissions", .desk) { [unowned self] c in await desk.consentPage(c.request) }
        r.add("GET", "/admin/reports/unused-balance.csv", .desk) { [unowned self] c in await desk.reportCSV(c.request) }
    }

    func metricsResponse() async -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        return HTTPResponse(status: 200, headers: headers, body: Array(await metricsText().utf8))
    }
}
