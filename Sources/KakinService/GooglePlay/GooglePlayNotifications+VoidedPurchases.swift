import GooglePlayClient
import KakinCore
import KakinStorage

/// The voided purchases poll: Google Play's list of refunded, charged-back and revoked orders
/// (`purchases.voidedpurchases.list`) read per app at its interval (`voidedPurchasesPollMinutes`, at least daily), so a
/// refund whose RTDN never arrived (notifications not configured, a push refused past Pub/Sub's retention) is still
/// taken back. Each voided purchase of a token Kakin knows is stored as a voided-purchase notification in the same inbox
/// as the pushes (`play_notifications`, one message id per voided record) and applied by the same worker and the one
/// apply: whichever of the push and the poll comes first takes the coins back, the other changes nothing.
///
/// The cursor (`sync_values`, `playVoided.<package>`) is the window being read, `startTime`…`endTime` in ms, and the
/// `token` of its next page while pages remain (Google ignores the times when a token is given); a window read to its
/// last page moves the next one's start to its end. The first run, and a run after a downtime, reaches 30 days back
/// (Google's limit, less `clockMarginMs`). Voided purchases of tokens Kakin never read are skipped: nothing was credited.
extension GooglePlayNotifications {
    /// How far back Google lists voided purchases.
    static let voidedLookBackMs: Int64 = 30 * 86_400_000
    /// Kept off both ends of Google's bounds (start at most 30 days back, end not after now) against clock skew.
    static let voidedClockMarginMs: Int64 = 60_000
    /// How long one run may hold an app's turn before another process may take it.
    static let voidedRunLeaseMs: Int64 = 10 * 60_000

    /// Where an app's poll stands.
    struct VoidedCursor: Equatable {
        var startMs: Int64
        var endMs: Int64
        /// The next page of the window; nil: the window was read to its end.
        var pageToken: String?

        init(startMs: Int64, endMs: Int64, pageToken: String?) {
            self.startMs = startMs
            self.endMs = endMs
            self.pageToken = pageToken
        }

        init?(stored: String) {
            guard let json = try? JSONParser.parse(stored), let start = json["startTime"]?.int64Value,
                  let end = json["endTime"]?.int64Value else { return nil }
            self.init(startMs: start, endMs: end, pageToken: json["token"]?.stringValue)
        }

        var stored: String {
            JSONValue.object(["startTime": .int(startMs), "endTime": .int(endMs), "token": .string(pageToken)]).jsonString
        }

        /// The window to read at `nowMs` after this cursor (nil: the first run): the same window while pages remain,
        /// else from the last window's end to now; never older than Google lists (a window left unfinished that long
        /// is read again from Google's oldest).
        static func next(after cursor: VoidedCursor?, nowMs: Int64) -> VoidedCursor {
            let oldest = nowMs - voidedLookBackMs + voidedClockMarginMs
            if let cursor, cursor.pageToken != nil, cursor.startMs >= oldest { return cursor }
            let start = max(cursor.map { $0.pageToken == nil ? $0.endMs : $0.startMs } ?? oldest, oldest)
            return VoidedCursor(startMs: start, endMs: max(nowMs - voidedClockMarginMs, start), pageToken: nil)
        }
    }

    static func voidedCursorName(_ packageName: String) -> String { "playVoided.\(packageName)" }

    /// What one run read and stored.
    public struct VoidedPollRun: Sendable, Equatable {
        /// The window read (`startTime`, `endTime`, ms).
        public var startMs: Int64
        public var endMs: Int64
        /// Voided purchases listed in the pages read.
        public var listed = 0
        /// New ones stored for the worker.
        public var stored = 0
        /// Of tokens Kakin never read (skipped).
        public var unknownTokens = 0
        /// Pages remain: the next run continues the window.
        public var morePages = false
    }

    /// Reads one app's voided purchases from its cursor on (at most the client's `voidedPagesMax` pages), stores the new
    /// ones as voided-purchase notifications and moves the cursor, then wakes the worker.
    @discardableResult
    public func pollVoided(packageName: String) async throws(KakinError) -> VoidedPollRun {
        let app = try purchases.connected(packageName)
        let name = Self.voidedCursorName(packageName)
        let window = VoidedCursor.next(after: try await store.syncValue(name).flatMap(VoidedCursor.init(stored:)), nowMs: purchases.clock.nowMs())
        let read: (voided: [VoidedPurchase], nextPageToken: String?)
        do {
            read = try await app.client.allVoidedPurchases(startTimeMs: window.startMs, endTimeMs: window.endMs, pageToken: window.pageToken)
        } catch {
            throw GooglePlayPurchases.kakinError(error)
        }
        var run = VoidedPollRun(startMs: window.startMs, endMs: window.endMs, listed: read.voided.count, morePages: read.nextPageToken != nil)
        for voided in read.voided {
            guard let known = try await store.playTokenRow(voided.purchaseToken), known.packageName == packageName else {
                run.unknownTokens += 1
                continue
            }
            if try await store.receivePlayNotification(messageId: Self.voidedMessageId(voided), packageName: packageName,
                                                       purchaseToken: voided.purchaseToken,
                                                       body: Self.voidedNotification(voided, packageName: packageName, kind: known.kind),
                                                       publishedAtMs: voided.voidedTimeMs) {
                run.stored += 1
            }
        }
        var next = window
        next.pageToken = read.nextPageToken
        try await store.setSyncValue(name, next.stored)
        metrics.increment(.playVoidedPolls)
        metrics.increment(.playVoidedStored, by: Int64(run.stored))
        if run.stored > 0 { worker.wake() }
        return run
    }

    /// A voided record's message id in the inbox: the same record read again (windows overlap at their ends, a page is
    /// read twice after a failure) is stored once; a second partial refund of the same order is a record of its own.
    static func voidedMessageId(_ v: VoidedPurchase) -> String {
        "voided:\(v.orderId ?? v.purchaseToken):\(v.voidedTimeMs):\(v.voidedQuantity.map(String.init) ?? "all")"
    }

    /// The voided-purchase notification Google would have pushed for `v`: `productType` from the token Kakin read
    /// (1 subscription, 2 one-time), `refundType` 2 for a quantity-based partial refund (`voidedQuantity`), else 1.
    static func voidedNotification(_ v: VoidedPurchase, packageName: String, kind: PlayTokenRow.Kind) -> JSONValue {
        ["version": "1.0", "packageName": .string(packageName), "eventTimeMillis": .string(String(v.voidedTimeMs)),
         "voidedPurchaseNotification": ["purchaseToken": .string(v.purchaseToken), "orderId": .string(v.orderId),
                                        "productType": .int(kind == .subscription ? 1 : 2), "refundType": .int(v.voidedQuantity == nil ? 1 : 2)]]
    }

    /// The poll's pass (a minute apart): each Play app whose turn is due is read by one process at a time; a success hands
    /// the turn back after 90 % of the app's interval, a failure or a window with pages left at once (the next pass).
    func pollVoidedInTurn() async {
        let apps = purchases.apps.withLock { $0.values.map(\.settings) }.sorted { $0.packageName < $1.packageName }
        for app in apps {
            let lease = "playVoidedPoll.\(app.packageName)"
            let now = retryClock.nowMs()
            guard (try? await store.takeLease(lease, owner: leaseOwner, nowMs: now, untilMs: now + Self.voidedRunLeaseMs)) == true else { continue }
            var handBackMs = retryClock.nowMs()
            do {
                let run = try await pollVoided(packageName: app.packageName)
                // Pages left: the next pass goes on with them.
                if !run.morePages { handBackMs = retryClock.nowMs() + app.voidedPollIntervalMs * 9 / 10 }
                logger.info("Play voided purchases read", ["play.package": .string(app.packageName), "voided.listed": .int(Int64(run.listed)),
                                                            "voided.stored": .int(Int64(run.stored))])
            } catch {
                metrics.increment(.playVoidedPollsFailed)
                logger.warning("Play voided purchases not read; will retry", ["play.package": .string(app.packageName),
                                                                               "error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            }
            try? await store.setLeaseEnd(lease, owner: leaseOwner, untilMs: handBackMs)
        }
    }
}
