import Foundation
import KakinCore
import KakinStorage
import KakinTestPostgres
import Testing
@testable import AppStoreSecurity
@testable import KakinService

/// A verifier the tests never reach: the use cases here are handed facts already verified (`VerifiedTransaction`).
let unusedVerifier: SignedDataVerifier = {
    let ca = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/apple-testdata/certs/testCA.der")
    return try! SignedDataVerifier(trustedRoots: [Array(try! Data(contentsOf: ca))], apps: [], clock: { 0 })
}()

let premium = Product(productId: "premium", kind: .autoRenewable, groupId: "g", period: ISOPeriod(months: 1))
let testCatalog = Catalog([coins100, premium])
let testEvents = CustomerEvents(catalog: testCatalog, wake: {})

/// The ingest over `store` for the test app `com.example`.
func ingest(_ store: KakinStore, policy: TransferPolicy = .keepFirstOwner, wallet: WalletPolicy = WalletPolicy(),
            setsAppAccountTokens: Bool = false) -> Ingest {
    Ingest(store: store, verifier: unusedVerifier, catalogs: ["com.example": testCatalog], walletPolicy: wallet, transferPolicy: policy,
           metrics: Metrics(), setsAppAccountTokens: { _ in setsAppAccountTokens }, wakeAppStoreJobs: {}, events: testEvents,
           apple2026: Apple2026Ingest(store: store, verifier: unusedVerifier, apps: [:], events: testEvents, metrics: Metrics()))
}

func wallets(_ store: KakinStore, order: SpendOrder = .freeFirst) -> Wallets {
    Wallets(store: store, spendOrder: order, metrics: Metrics(), logger: Logger(minimum: .error), events: testEvents)
}

extension Ingest {
    /// The app presents `tx` for `customer` (`IngestPath.app`).
    @discardableResult
    func present(_ customer: String, _ tx: TransactionPayload, path: IngestPath = .app) async throws -> IngestOutcome {
        try await apply(transaction: VerifiedTransaction(payload: tx, jws: "h.\(tx.transactionId).\(tx.signedDate)"), path: path,
                        presenter: path.options.owner == .presenter ? customer : nil).outcome!
    }
}
