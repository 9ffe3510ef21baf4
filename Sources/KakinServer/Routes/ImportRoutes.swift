import HTTPServer
import KakinCore
import KakinService

/// Imports (`kakin import`, the contract's "Import"): the file is the body, the kind and switches are the query.
extension KakinApp {
    static let importsPath = "/v1/admin/imports"

    func registerImportRoutes(_ r: inout RouteTable) {
        r.add("POST", Self.importsPath, .admin) { [unowned self] c throws(KakinError) in try await postImport(c) }
        r.add("GET", Self.importsPath, .adminRead) { [unowned self] _ throws(KakinError) in
            .json(["imports": .array(try await services.imports.list().map(\.json))], status: 200)
        }
        r.add("GET", Self.importsPath + "/{importId}", .adminRead) { [unowned self] c throws(KakinError) in
            .json(try await services.imports.status(c["importId"]).json, status: 200)
        }
        r.add("GET", Self.importsPath + "/{importId}/rejects", .adminRead) { [unowned self] c throws(KakinError) in try await getImportRejects(c) }
        r.add("POST", Self.importsPath + "/{importId}/cancel", .admin) { [unowned self] c throws(KakinError) in
            .json(try await services.imports.cancel(c["importId"]).json, status: 200)
        }
    }

    /// `POST /v1/admin/imports?kind=…[&dryRun=true][&events=true]` with the file as the body → 202 `{"importId"}`.
    func postImport(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let kind = c.request.query["kind"] ?? ""
        let id = try await services.imports.start(kind: kind, file: c.request.body, dryRun: try flag(c, "dryRun"), events: try flag(c, "events"),
                                                  createdBy: apiActor(c.request))
        return .json(["importId": .string(id)], status: 202, headers: [("Location", Self.importsPath + "/" + id)])
    }

    /// `GET …/{importId}/rejects[?limit=1..1000][&cursor=…]` → `{"rejects": [{"line", "row", "error"}], "nextCursor"}`.
    func getImportRejects(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let limit = try intParameter(c, "limit") ?? 100
        guard (1...ImportLimits.rejectsPageMax).contains(limit) else {
            throw KakinError(.invalidField, "limit must be 1 to \(ImportLimits.rejectsPageMax).")
        }
        var after: Int64?
        if let cursor = c.request.query["cursor"] {
            guard let n = Int64(cursor), n >= 0 else { throw KakinError(.invalidCursor) }
            after = n
        }
        let page = try await services.imports.rejects(c["importId"], after: after, limit: limit)
        return .json(["rejects": .array(page.rejects), "nextCursor": page.next.map { .string(String($0)) } ?? .null], status: 200)
    }

    func flag(_ c: RouteCall, _ name: String) throws(KakinError) -> Bool {
        switch c.request.query[name] {
        case nil, "false": return false
        case "true": return true
        default: throw KakinError(.invalidField, "\(name) must be true or false.")
        }
    }
}
