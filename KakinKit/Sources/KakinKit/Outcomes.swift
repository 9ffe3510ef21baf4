import Foundation

/// What a tap on "buy" ended in. Only `.failed` is an error; the others are states the UI shows.
public enum PurchaseOutcome: Sendable, Equatable {
    /// Kakin holds the transaction as applied (201 now, or 409 applied before) and it is finished.
    case completed(CompletedPurchase)
    /// Refused before any charge: an earlier purchase of this product is not finished yet. Show "your previous
    /// purchase is still being processed" (seed 001's alert), never the payment sheet. `error` is KKN-8005.
    case stillProcessing(productID: String, unfinished: [StoreTransaction], error: KakinKitError)
    /// Waiting for approval (Ask to Buy) or authentication (SCA); the result arrives as an update.
    case pending
    case cancelled
    /// Paid, but Kakin did not confirm it (network, Kakin unavailable, a refusal): the transaction stays
    /// unfinished and is retried on its own process at launch, foreground and before the wallet.
    case unfinished(StoreTransaction, processID: String, error: KakinKitError)
    /// Nothing was credited: the store refused or failed, the offer could not be signed, Kakin could not say
    /// who the customer is, or (rarely) the transaction was refunded before Kakin saw it.
    case failed(KakinKitError)
}

public struct CompletedPurchase: Sendable, Equatable {
    public var transaction: StoreTransaction
    /// `purchase-…`: the process that sent it (support reads it in Kakin's timeline).
    public var processID: String
    public var submission: Submission
}

/// Why a retry runs. Every retry runs on its own process (`retry-<trigger>-<uuid>`), never on the purchase path.
public enum RetryTrigger: String, Sendable, Equatable, CaseIterable {
    case launch, foreground, wallet, restore
    /// `Transaction.updates` delivered it (a renewal, a refund, an Ask to Buy approval, another device).
    case update
}

/// One unfinished transaction sent to Kakin again: the "snackbar" of seed 001.
public struct RetryOutcome: Sendable, Equatable {
    public var transaction: StoreTransaction
    public var trigger: RetryTrigger
    /// `retry-<trigger>-<uuid>`, the same for every attempt of this retry.
    public var processID: String
    public var attempts: Int
    public var result: Result

    public enum Result: Sendable, Equatable {
        /// 201: credited now; finished.
        case credited(Submission)
        /// 409: it had been credited already (the answer to an earlier try was lost); finished.
        case alreadyCredited(Submission)
        /// Refunded or revoked; Kakin recorded it, nothing to grant; finished.
        case revoked(KakinKitError)
        /// Still unfinished; retried at the next launch, foreground or wallet.
        case stillUnfinished(KakinKitError)
    }

    public var isFinished: Bool {
        if case .stillUnfinished = result { return false }
        return true
    }

    public var error: KakinKitError? {
        switch result {
        case .credited, .alreadyCredited: return nil
        case .revoked(let e), .stillUnfinished(let e): return e
        }
    }
}

/// Everything the coordinator tells the UI without being asked.
public enum PurchaseEvent: Sendable, Equatable {
    /// A retry ended (seed 001's snackbar: "your coins have arrived" / "still processing").
    case retryFinished(RetryOutcome)
    /// After launch or foreground, purchases that are still not finished (seed 001's alert), so users do
    /// not buy again.
    case stillProcessing([StoreTransaction])
    /// Kakin sent a new status (after a purchase, a retry, a restore or a refresh).
    case statusUpdated(CustomerStatus)
}

/// What the launch sequence found.
public struct LaunchReport: Sendable, Equatable {
    /// New, active or inactive (seed 004), or why Kakin could not say.
    public var status: Result<CustomerStatus, KakinKitError>
    public var retries: [RetryOutcome]
    /// Still unfinished after the retries: tell the user a purchase is being processed.
    public var stillUnfinished: [StoreTransaction]
}

public struct WalletReport: Sendable, Equatable {
    public var wallet: Wallet
    /// The retries run before the balance was read.
    public var retries: [RetryOutcome]
}

public struct RestoreReport: Sendable, Equatable {
    public var status: CustomerStatus
    public var retries: [RetryOutcome]
    /// `AppStore.sync()` failed (often: the user dismissed the sign-in); Kakin's restore still ran.
    public var syncError: KakinKitError?
}

/// How unfinished transactions are retried within one trigger.
public struct RetryPolicy: Sendable, Equatable {
    /// Tries per transaction per trigger (the next trigger starts again).
    public var attemptsMax: Int
    public var initialDelay: Duration
    public var delayMax: Duration

    public init(attemptsMax: Int = 3, initialDelay: Duration = .seconds(1), delayMax: Duration = .seconds(30)) {
        self.attemptsMax = max(1, min(attemptsMax, 10))
        self.initialDelay = initialDelay
        self.delayMax = delayMax
    }

    /// Doubling from `initialDelay`, capped at `delayMax`.
    public func delay(afterAttempt attempt: Int) -> Duration {
        var d = initialDelay
        for _ in 1..<max(1, attempt) where d < delayMax { d = d * 2 }
        return min(d, delayMax)
    }
}
