import KakinCore

extension ExternalPurchaseReportJob {
    /// The job as stored between attempts (`external_purchase_reports.job`): the report and every field of the state
    /// machine, so a restarted worker carries on where the last one stopped.
    public var storedJSON: JSONValue {
        ["report": report.json, "state": .string(state.rawValue), "retryableFailures": .int(Int64(retryableFailures)),
         "nextAttemptMs": .int(nextAttemptMs), "sentAtMs": .int(sentAtMs), "errors": .array(errors.map(\.json)),
         "failures": .int(Int64(failures))]
    }

    /// A job read back from `storedJSON`; nil for anything else.
    public init?(stored json: JSONValue) {
        guard let reportJSON = json["report"], let report = try? ExternalPurchaseReport(json: reportJSON),
              let state = json["state"]?.stringValue.flatMap(State.init(rawValue:)) else { return nil }
        self.init(report: report, createdAtMs: 0)
        self.state = state
        retryableFailures = Int(json["retryableFailures"]?.int64Value ?? 0)
        nextAttemptMs = json["nextAttemptMs"]?.int64Value
        sentAtMs = json["sentAtMs"]?.int64Value
        errors = (json["errors"]?.arrayValue ?? []).compactMap { try? ExternalPurchaseReportError(json: $0) }
        failures = Int(json["failures"]?.int64Value ?? 0)
    }
}

/// What Kakin itself can fix in a report Apple refused, before resubmitting it with the same `requestIdentifier`
/// (pure). The report is rebuilt from what is recorded now (the team may have fixed a purchase or the app's tax
/// settings since), and a line item Apple refused for a creation date in the future (`FutureDateError`, 6: the
/// provider's clock ran ahead of Apple's) is dated at the moment of resubmitting. A rebuild equal to the refused
/// report fixes nothing: it stays failed, with Apple's errors on the desk, until something changes.
public enum ExternalPurchaseReportCorrection {
    /// Apple's FutureDateError.
    public static let futureDateErrorCode = 6

    /// The corrected report, or nil when nothing differs from the one refused.
    /// - Parameters:
    ///   - refused: the report Apple refused (its `requestIdentifier` is kept).
    ///   - errors: Apple's errors for it.
    ///   - rebuilt: the token's report built again from current records (nil: nothing to report any more).
    public static func corrected(_ refused: ExternalPurchaseReport, errors: [ExternalPurchaseReportError],
                                 rebuilt: ExternalPurchaseReport?, nowMs: Int64) -> ExternalPurchaseReport? {
        guard var report = rebuilt, report.externalPurchaseId == refused.externalPurchaseId else { return nil }
        report.requestIdentifier = refused.requestIdentifier
        let futureDated = Set(errors.filter { $0.errorCode == futureDateErrorCode }.compactMap(\.lineItemId))
        for i in report.lineItems.indices {
            if futureDated.contains(report.lineItems[i].lineItemId) {
                report.lineItems[i].creationDateMs = nowMs
            } else {
                report.lineItems[i].creationDateMs = min(report.lineItems[i].creationDateMs, nowMs)
            }
        }
        return report == refused ? nil : report
    }
}
