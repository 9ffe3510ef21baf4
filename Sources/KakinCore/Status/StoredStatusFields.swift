/// What a status read loads instead of a JWS: the decoded payload's fields that Kakin's rules read, kept at
/// ingest as compact JSON beside the signed copy (`status_json`). A read then parses a few hundred bytes per
/// row instead of base64-decoding a JWS whose header alone (three certificates) is several kilobytes.
///
/// The fields are the keys the typed payload reads (`TransactionPayload.Key`, `RenewalInfoPayload.Key`), so a value
/// stored is a value Apple signed (the JWS stays stored beside it as the proof), and decoding fills the same fields the
/// same way as a verified payload's `init(json:)`. A key added to a payload's `Key` is kept from then on; rows stored
/// before keep the older set until their next copy arrives.
public enum StoredStatusFields {
    public static let transactionKeys = Set(TransactionPayload.Key.names.strings)
    public static let renewalInfoKeys = Set(RenewalInfoPayload.Key.names.strings)

    public static func json(of payload: TransactionPayload) -> String { compact(payload.raw, keys: transactionKeys) }
    public static func json(of payload: RenewalInfoPayload) -> String { compact(payload.raw, keys: renewalInfoKeys) }

    /// A stored value: the compact JSON, or (rows stored before the column existed) the signed copy itself. Read
    /// straight into the typed payload (`JSONParser.members`), no JSON tree built: a status read decodes a handful of
    /// these, the rollup and the writes that tell an event with the customer's status many more.
    public static func transaction(_ stored: String) -> TransactionPayload? {
        decode(stored) { (members, document) throws(PayloadDecodingError) in try TransactionPayload(members, document: document) }
    }

    public static func renewalInfo(_ stored: String) -> RenewalInfoPayload? {
        decode(stored) { (members, document) throws(PayloadDecodingError) in try RenewalInfoPayload(members, document: document) }
    }

    static func compact(_ raw: JSONValue, keys: Set<String>) -> String {
        guard case .object(let o) = raw else { return raw.jsonString }
        return JSONValue.object(o.filter { keys.contains($0.key) }).jsonString
    }

    static func decode<Key, Payload>(_ stored: String, _ payload: (PayloadMembers<Key>, PayloadDocument) throws(PayloadDecodingError) -> Payload)
        -> Payload?
    {
        if stored.utf8.first == UInt8(ascii: "{") {
            var text = stored
            guard let slots = text.withUTF8({ JSONParser.members($0, Key.self) }) else { return nil }
            return try? payload(PayloadMembers(slots: slots), PayloadDocument(text: stored))
        }
        guard let bytes = StoredJWS.payloadBytes(stored),
              let slots = bytes.withUnsafeBufferPointer({ JSONParser.members($0, Key.self) }) else { return nil }
        return try? payload(PayloadMembers(slots: slots), PayloadDocument(text: String(decoding: bytes, as: UTF8.self)))
    }
}
