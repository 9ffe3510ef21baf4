import HTTPServer
import KakinCore
import KakinService

/// `/admin/imports…`: imports and their rejected rows (the same reads as `GET /v1/admin/imports…`).
extension SupportDesk {
    public func importsPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            Layout.response(ImportsPage.render(session: session, imports: try await services.imports.list()))
        }
    }

    public func importPage(_ request: HTTPRequest, id: String) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let status = try await services.imports.status(id)
            let rejects = try await services.imports.rejects(id, after: nil, limit: ImportPage.rejectsMax).rejects
            return Layout.response(ImportPage.render(session: session, status: status, rejects: rejects))
        }
    }
}
