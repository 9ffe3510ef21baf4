import KakinCore
import KakinCrypto

/// A Google service account as its JSON key file holds it (the file a Play Console user downloads; the Play
/// simulator serves one): the fields the JWT-bearer grant needs.
public struct GoogleServiceAccount: Sendable {
    public var clientEmail: String
    public var privateKeyId: String
    public var privateKey: RSAPrivateKey
    /// Where the grant is posted: Google's `https://oauth2.googleapis.com/token`, or the simulator's.
    public var tokenURI: String
    public var projectId: String?

    public init(clientEmail: String, privateKeyId: String, privateKey: RSAPrivateKey, tokenURI: String, projectId: String?) {
        self.clientEmail = clientEmail
        self.privateKeyId = privateKeyId
        self.privateKey = privateKey
        self.tokenURI = tokenURI
        self.projectId = projectId
    }

    /// Reads a key file: `type` "service_account", `client_email`, `private_key` (PKCS#8 PEM), `private_key_id`,
    /// `token_uri`. The error names the field, never its value.
    public init(fileBytes: [UInt8]) throws(GooglePlayCredentialError) {
        guard fileBytes.count <= Self.fileBytesMax, let json = try? JSONParser.parse(fileBytes, depthMax: 8), case .object = json else {
            throw GooglePlayCredentialError("the service-account file is not a JSON object")
        }
        if let type = json["type"]?.stringValue, type != "service_account" {
            throw GooglePlayCredentialError("the key file's type is \(type), not service_account")
        }
        func field(_ name: String) throws(GooglePlayCredentialError) -> String {
            guard let value = json[name]?.stringValue, !value.isEmpty else {
                throw GooglePlayCredentialError("the service-account file has no \(name)")
            }
            return value
        }
        let pem = try field("private_key")
        do {
            privateKey = try RSAPrivateKey(pem: pem)
        } catch {
            throw GooglePlayCredentialError("private_key is not an RSA private key (\(error.operation))")
        }
        clientEmail = try field("client_email")
        privateKeyId = try field("private_key_id")
        tokenURI = try field("token_uri")
        projectId = json["project_id"]?.stringValue
    }

    /// The key file, with the fields Google's own libraries read (they need `client_email`, `token_uri`,
    /// `private_key` and use `private_key_id`). It holds the private key: treat it as a secret.
    public func fileJSON(clientId: String) throws(CryptoError) -> JSONValue {
        ["type": "service_account", "project_id": .string(projectId), "private_key_id": .string(privateKeyId),
         "private_key": .string(try privateKey.pemPKCS8()), "client_email": .string(clientEmail), "client_id": .string(clientId),
         "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": .string(tokenURI),
         "universe_domain": "googleapis.com"]
    }
}

/// A service account that cannot be used; the reason names a field, never a key.
public struct GooglePlayCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
