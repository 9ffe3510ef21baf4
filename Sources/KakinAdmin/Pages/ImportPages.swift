import KakinCore
import KakinService
import KakinStorage

extension Link {
    static func imports() -> String { "/admin/imports" }
    static func importJob(_ id: String) -> String { "/admin/imports/\(URLText.encode(id))" }
}

extension Fmt {
    static func tone(_ state: String) -> HistoryEntry.Tone {
        switch state {
        case "done": return .good
        case "running", "queued": return .neutral
        case "cancelled": return .warn
        default: return .bad
        }
    }
}

/// `/admin/imports`: the latest imports with their progress.
enum ImportsPage {
    static func render(session: AdminSession, imports: [ImportStatus]) -> HTML {
        let rows = imports.map { s -> HTML in
            let j = s.job
            return """
                <tr><td><a class="mono" href="\(Link.importJob(j.importId))">\(j.importId)</a><div class="small muted">\(j.kind)\
                \(j.dryRun ? " · dry run" : "")\(j.events ? " · events" : "") · \(Fmt.time(j.createdAtMs))</div></td>\
                <td>\(Fmt.badge(s.state, Fmt.tone(s.state)))</td><td class="num">\(Fmt.number(j.done)) / \(Fmt.number(j.rows))</td>\
                <td class="num">\(Fmt.number(j.applied))</td><td class="num">\(Fmt.number(j.alreadyPresent))</td>\
                <td class="num">\(j.rejected > 0 ? Fmt.badge(Fmt.number(j.rejected), .bad) : "0")</td></tr>
                """
        }
        let empty: HTML = imports.isEmpty
            ? "<p class=\"muted\">No import yet. Run <code>kakin import KIND FILE</code> (docs/operations.md, \"Moving in\").</p>" : .empty
        return Layout.page("Imports", session: session, """
            <h1>Imports</h1>
            <section class="card">
            <p class="small muted">Customers, purchases and coin balances moved in from the system used before Kakin. A row is applied \
            once; one applied before counts as already present; a rejected row changed nothing.</p>
            <div class="scroll"><table><tr><th>import</th><th>state</th><th class="num">rows</th><th class="num">applied</th>\
            <th class="num">already present</th><th class="num">rejected</th></tr>\(rows)</table></div>\(empty)
            </section>
            """)
    }
}

/// `/admin/imports/{id}`: one import's progress and its rejected rows (line, error, the row as read).
enum ImportPage {
    static func render(session: AdminSession, status s: ImportStatus, rejects: [JSONValue]) -> HTML {
        let j = s.job
        var facts = [Fact("kind", j.kind + (j.dryRun ? " (dry run: nothing written)" : "")),
                     Fact("events", j.events ? "told" : "not told"),
                     Fact("rows", "\(Fmt.number(j.done)) of \(Fmt.number(j.rows)) done"),
                     Fact("applied", Fmt.number(j.applied)), Fact("already present", Fmt.number(j.alreadyPresent)),
                     Fact("rejected", Fmt.number(j.rejected)), Fact("rate", "\(s.ratePerSecond) rows/s"),
                     Fact("started", Fmt.time(j.createdAtMs) + (j.createdBy.map { " by \($0)" } ?? ""))]
        if let eta = s.etaSeconds, j.state.isOpen { facts.append(Fact("ETA", "\(eta) s")) }
        if let f = j.finishedAtMs { facts.append(Fact("ended", Fmt.time(f))) }
        if let e = j.lastError { facts.append(Fact("error", e)) }
        let rows = rejects.map { r -> HTML in
            let e = r["error"]
            let fields = (r["row"]?.objectValue ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.stringValue ?? "")" }
            return """
                <tr><td class="num">\(r["line"]?.int64Value.map(String.init) ?? "")</td>\
                <td><span class="mono">\(e?["id"]?.stringValue ?? "")</span> \(e?["code"]?.stringValue ?? "")<div class="small">\(e?["message"]?.stringValue ?? "")</div></td>\
                <td class="small mono">\(fields.joined(separator: " · "))</td></tr>
                """
        }
        let rejectsSection: HTML = rejects.isEmpty ? "<p class=\"muted\">No rejected row.</p>" : """
            <div class="scroll"><table><tr><th class="num">line</th><th>error</th><th>row</th></tr>\(rows)</table></div>\
            \(j.rejected > Int64(rejects.count) ? "<p class=\"small muted\">The first \(rejects.count); every one: <code>GET /v1/admin/imports/\(j.importId)/rejects</code>.</p>" as HTML : .empty)
            """
        return Layout.page("Import \(j.importId)", session: session, """
            <p class="small"><a href="\(Link.imports())">Imports</a></p>
            <h1>Import <span class="mono">\(j.importId)</span> \(Fmt.badge(s.state, Fmt.tone(s.state)))</h1>
            <section class="card">\(Fmt.facts(facts))</section>
            <section class="card"><h2>Rejected rows</h2>\(rejectsSection)</section>
            """)
    }
}
