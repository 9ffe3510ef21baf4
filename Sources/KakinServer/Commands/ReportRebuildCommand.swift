import Foundation
import KakinCore
import KakinService
import KakinSystem

/// `kakin report rebuild [--config F] [--database URL]`: recomputes every customer's share of the business numbers and
/// the daily rollups from the stored facts alone and corrects the rollups kept up incrementally, one customer range at a
/// time (read on a snapshot, then one short write: `BusinessMetrics.rebuild`), so a running Kakin keeps ingesting.
/// Prints `{"customers", "cells", "differing", "sample", "writes", "leftToTheWorker"}`; `differing` 0 means the
/// incremental rollups were exactly what the facts say. Run it once after upgrading to migration 16 (the rollups start
/// from the events recorded since) or 20 (purchases outside the App Store made before are counted), and after changing
/// `reportingTimeZone` or an app's environments.
enum ReportRebuildCommand {
    static func run(_ args: ParsedArguments, output: Int32, errorOutput: Int32) async -> Int32 {
        func fail(_ message: String, _ status: Int32) -> Int32 {
            FileDescriptorOutput.writeAll(errorOutput, Array("kakin report rebuild: \(message)\n".utf8))
            return status
        }
        let config: Configuration
        do {
            config = try OperatorDatabase.configuration(args)
        } catch {
            return fail("invalid configuration: \(error)", 2)
        }
        do {
            let (app, database) = try await KakinRuntime.makeApp(KakinRuntime.Options(configuration: config, logger: Logger(minimum: .error)))
            let result: BusinessMetrics.RebuildResult
            do {
                result = try await app.services.businessMetrics.rebuild()
            } catch {
                await database.close()
                throw error
            }
            await database.close()
            let json: JSONValue = ["customers": .int(Int64(result.customers)), "cells": .int(Int64(result.cells)),
                                   "differing": .int(Int64(result.differing)), "sample": .array(result.sample.map(JSONValue.string)),
                                   "writes": .int(Int64(result.writes)), "leftToTheWorker": .int(Int64(result.leftToTheWorker))]
            FileDescriptorOutput.writeAll(output, Array((json.prettyString() + "\n").utf8))
            return 0
        } catch let error as KakinError {
            return fail(error.message + (error.detail.map { " (\($0))" } ?? ""), error.kind == .invalidConfiguration ? 2 : 1)
        } catch {
            return fail("\(error)", 1)
        }
    }
}
