import HTTPServer
import KakinCore
import KakinOfferings
import KakinService

/// Offerings and experiments over HTTP (the contract's "Offerings and experiments"): a customer's offering for a
/// placement, the attributes its backend sets, the admin API's objects, audit and results, and the desk's pages.
/// Thin: parse, call `Offerings`, render.
extension KakinApp {
    func registerOfferingRoutes(_ r: inout RouteTable) {
        r.add("GET", "/v1/customers/{customerId}/offerings", .customer) { [unowned self] c throws(KakinError) in
            .json(try await services.offerings.offering(customerId: c.customerId, query: try offeringsQuery(c.request)), status: 200)
        }
        r.add("PUT", "/v1/customers/{customerId}/attributes", .backend) { [unowned self] c throws(KakinError) in
            .json(try await services.offerings.setAttributes(customerId: c.customerId, body: .object(try c.request.jsonObject().object)), status: 200)
        }
        for kind in OfferingObjectKind.allCases {
            r.add("PUT", "/v1/admin/\(kind.pathSegment)/{id}", .admin) { [unowned self] c throws(KakinError) in
                .json(try await services.offerings.put(kind, id: c["id"], body: .object(try c.request.jsonObject().object), actor: apiActor(c.request)),
                      status: 200)
            }
            r.add("GET", "/v1/admin/\(kind.pathSegment)/{id}", .adminRead) { [unowned self] c throws(KakinError) in
                .json(try await services.offerings.object(kind, id: c["id"]), status: 200)
            }
            r.add("GET", "/v1/admin/\(kind.pathSegment)", .adminRead) { [unowned self] _ throws(KakinError) in
                .json([kind.pathSegment: .array(try await services.offerings.objects(kind))], status: 200)
            }
        }
        r.add("GET", "/v1/admin/experiments/{id}/results", .adminRead) { [unowned self] c throws(KakinError) in
            .json(try await services.offerings.results(experimentId: c["id"]), status: 200)
        }
        r.add("GET", "/v1/admin/audit", .adminRead) { [unowned self] c throws(KakinError) in try await getOfferingsAudit(c) }

        r.add("GET", "/admin/offerings", .desk) { [unowned self] c in await desk.offeringsPage(c.request) }
        r.add("GET", "/admin/offerings/edit", .desk) { [unowned self] c in await desk.offeringEditPage(c.request) }
        r.add("POST", "/admin/offerings/edit", .desk) { [unowned self] c in await desk.saveOffering(c.request) }
        r.add("GET", "/admin/experiments/{id}", .desk) { [unowned self] c in await desk.experimentPage(c.request, id: c["id"]) }
        r.add("GET", "/admin/audit", .desk) { [unowned self] c in await desk.auditPage(c.request) }
    }

    /// `?placement=P&platform=ios|android|web[&appVersion=V][&country=CC]` (400 `invalid_offerings_query` otherwise).
    func offeringsQuery(_ request: HTTPRequest) throws(KakinError) -> Offerings.Query {
        let q = request.query
        guard let placement = q["placement"], OfferingIDs.isValid(placement) else {
            throw KakinError(.invalidOfferingsQuery, "placement is required: the placement's id.")
        }
        guard let platform = q["platform"].flatMap(Platform.init(rawValue:)) else {
            throw KakinError(.invalidOfferingsQuery, "platform is required: ios, android or web.")
        }
        var query = Offerings.Query(placement: placement, platform: platform)
        if let v = q["appVersion"], !v.isEmpty {
            guard let version = AppVersion(v) else { throw KakinError(.invalidOfferingsQuery, "appVersion is dot-separated numbers, such as 2.4.1.") }
            query.appVersion = version
        }
        if let c = q["country"], !c.isEmpty {
            guard CountryCode.isValid(c.uppercased()) else { throw KakinError(.invalidOfferingsQuery, "country is an ISO 3166-1 alpha-2 code, such as JP.") }
            query.country = c.uppercased()
        }
        return query
    }

    /// `GET /v1/admin/audit?limit=50&cursor=…[&kind=offering|placement|experiment][&id=…]`.
    func getOfferingsAudit(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let limit = try intParameter(c, "limit") ?? 50
        guard (1...OfferingLimits.auditPageMax).contains(limit) else {
            throw KakinError(.invalidField, "limit must be from 1 to \(OfferingLimits.auditPageMax).")
        }
        var kind: OfferingObjectKind?
        if let k = c.request.query["kind"], !k.isEmpty {
            guard let parsed = OfferingObjectKind(rawValue: k) else { throw KakinError(.invalidField, "kind must be offering, placement or experiment.") }
            kind = parsed
        }
        let id = c.request.query["id"].flatMap { $0.isEmpty ? nil : $0 }
        return .json(try await services.offerings.audit(limit: limit, cursor: c.request.query["cursor"], kind: kind, id: id), status: 200)
    }
}
