import Glibc

/// Why ``HTTPServer/start()`` failed. `code` is stable; `message` is for people.
public struct HTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        public static let invalidConfiguration = Code("invalidConfiguration")
        /// `host` is not an IP literal (or "localhost"), or not an address of this machine.
        public static let invalidHost = Code("invalidHost")
        public static let addressInUse = Code("addressInUse")
        /// Another socket error while binding, e.g. a privileged port.
        public static let bindFailed = Code("bindFailed")
        public static let alreadyRunning = Code("alreadyRunning")
        /// libmicrohttpd refused to start; it logs why on stderr.
        public static let daemonStartFailed = Code("daemonStartFailed")
    }

    public let code: Code
    public let message: String

    public var description: String { "\(code): \(message)" }
}

/// A bound, listening TCP socket. Kakin opens it itself, instead of letting libmicrohttpd bind,
/// so that a failure says which address and why (errno), and the bound port is known at once.
struct ListenSocket {
    let descriptor: Int32
    let port: Int

    static func open(host: String, port: Int, backlog: Int) throws(HTTPServerError) -> ListenSocket {
        let literal = host == "localhost" ? "127.0.0.1" : host
        var storage = sockaddr_storage()
        let family: Int32
        let addressLength: socklen_t
        if let ipv4 = parseIPv4(literal, port: port) {
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: ipv4, as: sockaddr_in.self) }
            family = AF_INET
            addressLength = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else if let ipv6 = parseIPv6(literal, port: port) {
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: ipv6, as: sockaddr_in6.self) }
            family = AF_INET6
            addressLength = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            throw HTTPServerError(code: .invalidHost, message: "host '\(host)' is not an IPv4 or IPv6 address")
        }

        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else {
            throw HTTPServerError(code: .bindFailed, message: "socket(): \(errnoDescription())")
        }
        var enabled: Int32 = 1
        // Lets a restarted server bind while old connections sit in TIME_WAIT.
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &enabled, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 {
            setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &enabled, socklen_t(MemoryLayout<Int32>.size))
        }

        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, addressLength) }
        }
        guard bound == 0 else {
            let error = errno
            close(descriptor)
            let what = "cannot bind \(host) port \(port): \(errnoDescription(error))"
            switch error {
            case EADDRINUSE: throw HTTPServerError(code: .addressInUse, message: what)
            case EADDRNOTAVAIL: throw HTTPServerError(code: .invalidHost, message: what)
            default: throw HTTPServerError(code: .bindFailed, message: what)
            }
        }
        guard listen(descriptor, Int32(clamping: backlog)) == 0 else {
            let what = "listen(): \(errnoDescription())"
            close(descriptor)
            throw HTTPServerError(code: .bindFailed, message: what)
        }

        var boundAddress = sockaddr_storage()
        var boundLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &boundAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &boundLength) }
        }
        guard named == 0 else {
            let what = "getsockname(): \(errnoDescription())"
            close(descriptor)
            throw HTTPServerError(code: .bindFailed, message: what)
        }
        let networkPort = withUnsafeBytes(of: &boundAddress) { bytes in
            family == AF_INET
                ? bytes.load(as: sockaddr_in.self).sin_port
                : bytes.load(as: sockaddr_in6.self).sin6_port
        }
        return ListenSocket(descriptor: descriptor, port: Int(UInt16(bigEndian: networkPort)))
    }

    private static func parseIPv4(_ literal: String, port: Int) -> sockaddr_in? {
        var address = sockaddr_in()
        guard inet_pton(AF_INET, literal, &address.sin_addr) == 1 else { return nil }
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    private static func parseIPv6(_ literal: String, port: Int) -> sockaddr_in6? {
        var address = sockaddr_in6()
        guard inet_pton(AF_INET6, literal, &address.sin6_addr) == 1 else { return nil }
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = UInt16(port).bigEndian
        return address
    }
}

func errnoDescription(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
