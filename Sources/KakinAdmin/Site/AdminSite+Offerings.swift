import HTTPServer
import KakinCore
import KakinOfferings
import KakinService
import KakinStorage

/// `/admin/offerings…`, `/admin/experiments/{id}`, `/admin/audit`: offerings, placements and experiments edited with the
/// admin API's own use case (`Offerings.put`, who = the signed-in name), the audit log, and an experiment's results.
extension SupportDesk {
    public func offeringsPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            var objects: [OfferingObjectKind: [JSONValue]] = [:]
            for kind in OfferingObjectKind.allCases { objects[kind] = try await services.offerings.objects(kind) }
            return Layout.response(OfferingsPage.render(session: session, objects: objects, notice: .empty))
        }
    }

    /// The kind and id of `?kind=…&id=…`.
    static func offeringTarget(_ request: HTTPRequest) throws(KakinError) -> (OfferingObjectKind, String) {
        guard let kind = request.query["kind"].flatMap(OfferingObjectKind.init(rawValue:)) else {
            throw KakinError(.invalidField, "kind must be offering, placement or experiment.")
        }
        guard let id = request.query["id"], OfferingIDs.isValid(id) else {
            throw KakinError(kind.invalid, "The id must be 1 to \(OfferingLimits.idLengthMax) characters of A-Z a-z 0-9 . _ -")
        }
        return (kind, id)
    }

    public func offeringEditPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let (kind, id) = try Self.offeringTarget(request)
            return Layout.response(try await editPage(session, kind, id, text: nil, error: nil,
                                                      notice: request.query["done"] == "saved" ? HTML(stringLiteral: "<div class=\"flash\">Saved.</div>") : HTML.empty))
        }
    }

    func editPage(_ session: AdminSession, _ kind: OfferingObjectKind, _ id: String, text: String?, error: KakinError?, notice: HTML) async throws(KakinError) -> HTML {
        var stored: JSONValue?
        do {
            stored = try await services.offerings.object(kind, id: id)
        } catch where error.kind == kind.notFound {
            stored = nil
        }
        let body = stored.map { o -> String in
            var fields = o.objectValue ?? [:]
            for k in ["id", "version", "updatedAt", "updatedBy", "state"] { fields[k] = nil }
            return JSONValue.object(fields).prettyString()
        }
        let audit = try await services.offerings.audit(limit: 20, cursor: nil, kind: kind, id: id)["entries"]?.arrayValue ?? []
        return OfferingEditPage.render(session: session, kind: kind, id: id, stored: stored, text: text ?? body ?? OfferingEditPage.template(kind),
                                       error: error, audit: audit, notice: notice)
    }

    /// Saves the form's JSON as the admin API's PUT would; a refusal shows the form again with its error and the text
    /// as sent (nothing changed).
    public func saveOffering(_ request: HTTPRequest) async -> HTTPResponse {
        await action(request) { session, form throws(KakinError) in
            let (kind, id) = try Self.offeringTarget(request)
            let text = form["body"] ?? ""
            do throws(KakinError) {
                _ = try await services.offerings.put(kind, id: id, body: try Self.formJSON(text), actor: session.actor)
            } catch {
                return Layout.response(try await editPage(session, kind, id, text: text, error: error, notice: .empty), status: 422)
            }
            return Layout.redirect(Self.with(Link.offeringEdit(kind, id), done: "saved"))
        }
    }

    static func formJSON(_ text: String) throws(KakinError) -> JSONValue {
        do {
            return try JSONParser.parse(text, depthMax: 32)
        } catch {
            throw KakinError(.malformedJSON, "The text is not JSON: \(error.description)")
        }
    }

    public func experimentPage(_ request: HTTPRequest, id: String) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            Layout.response(ExperimentPage.render(session: session, results: try await services.offerings.results(experimentId: id)))
        }
    }

    public func auditPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let kind = request.query["kind"].flatMap(OfferingObjectKind.init(rawValue:))
            let id = request.query["id"].flatMap { $0.isEmpty ? nil : $0 }
            let page = try await services.offerings.audit(limit: 100, cursor: request.query["cursor"], kind: kind, id: id)
            return Layout.response(AuditPage.render(session: session, page: page, kind: kind, id: id))
        }
    }
}
