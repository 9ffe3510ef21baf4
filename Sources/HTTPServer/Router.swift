/// Values captured from a matched route pattern, percent-decoded.
public struct PathParameters: Sendable {
    private var captures: [(name: String, value: String)]

    init(_ captures: [(name: String, value: String)]) {
        self.captures = captures
    }

    public subscript(_ name: String) -> String? {
        captures.first { $0.name == name }?.value
    }
}

/// Answers a request that matched a route.
public typealias RouteHandler = @Sendable (HTTPRequest, PathParameters) async -> HTTPResponse

/// Maps method + path pattern to handlers.
///
/// Patterns are "/"-separated segments: literals, `{name}` (one segment) and a trailing
/// `{name...}` (the rest of the path, possibly empty, decoded and joined by "/"). When several
/// patterns match, the most specific one wins, segment by segment: literal over `{name}` over
/// `{name...}`, whatever the order of registration. Empty segments are ignored, so "/a//b/"
/// matches "/a/b". A HEAD request falls back to the GET handler (the server sends no body).
public struct Router: Sendable {
    private var routes: [Route] = []

    public init() {}

    /// Registers `handler` for `method` (case-sensitive, e.g. "POST") on `pattern`.
    /// Registering the same method and pattern twice, or a malformed pattern, is a programming error.
    public mutating func add(_ method: String, _ pattern: String, _ handler: @escaping RouteHandler) {
        let segments = Self.parse(pattern: pattern)
        if let index = routes.firstIndex(where: { $0.segments == segments }) {
            precondition(routes[index].handlers[method] == nil, "route \(method) \(pattern) registered twice")
            routes[index].handlers[method] = handler
            return
        }
        routes.append(Route(segments: segments, handlers: [method: handler]))
        // Stable: equally specific patterns keep their registration order.
        routes = routes.enumerated()
            .sorted { lhs, rhs in
                if lhs.element.specificity == rhs.element.specificity { return lhs.offset < rhs.offset }
                return lhs.element.specificity.lexicographicallyPrecedes(rhs.element.specificity)
            }
            .map(\.element)
    }

    /// Runs the handler of the most specific matching route.
    /// - Parameters:
    ///   - notFound: answers when no pattern matches the path.
    ///   - methodNotAllowed: answers when patterns match but none for this method; gets the
    ///     allowed methods. The router adds an `Allow` header unless the response has one.
    public func handle(
        _ request: HTTPRequest,
        notFound: (HTTPRequest) -> HTTPResponse,
        methodNotAllowed: (HTTPRequest, _ allowedMethods: [String]) -> HTTPResponse
    ) async -> HTTPResponse {
        guard let pathSegments = Self.decodedSegments(of: request.rawPath) else {
            return notFound(request)
        }
        var allowedMethods: [String] = []
        var pathMatched = false
        for route in routes {
            guard let captures = route.match(pathSegments) else { continue }
            pathMatched = true
            if let handler = route.handlers[request.method]
                ?? (request.method == "HEAD" ? route.handlers["GET"] : nil)
            {
                return await handler(request, PathParameters(captures))
            }
            for method in route.handlers.keys where !allowedMethods.contains(method) {
                allowedMethods.append(method)
            }
        }
        guard pathMatched else { return notFound(request) }
        if allowedMethods.contains("GET") && !allowedMethods.contains("HEAD") {
            allowedMethods.append("HEAD")
        }
        allowedMethods.sort()
        var response = methodNotAllowed(request, allowedMethods)
        if !response.headers.contains("Allow") {
            response.headers.add("Allow", allowedMethods.joined(separator: ", "))
        }
        return response
    }

    private static func decodedSegments(of rawPath: String) -> [String]? {
        var segments: [String] = []
        for rawSegment in rawPath.utf8.split(separator: UInt8(ascii: "/")) {
            guard let segment = PercentDecoding.decode(rawSegment) else { return nil }
            segments.append(segment)
        }
        return segments
    }

    private static func parse(pattern: String) -> [PatternSegment] {
        let parts = pattern.split(separator: "/")
        return parts.enumerated().map { index, part in
            guard part.hasPrefix("{") else {
                precondition(!part.contains("{") && !part.contains("}"), "malformed route pattern \(pattern)")
                return .literal(String(part))
            }
            precondition(part.hasSuffix("}") && part.count > 2, "malformed route pattern \(pattern)")
            let name = part.dropFirst().dropLast()
            if name.hasSuffix("...") {
                precondition(index == parts.count - 1, "{name...} must end the route pattern \(pattern)")
                return .remainder(String(name.dropLast(3)))
            }
            return .parameter(String(name))
        }
    }
}

private enum PatternSegment: Equatable {
    case literal(String)
    case parameter(String)
    case remainder(String)

    /// Lower is more specific.
    var rank: Int {
        switch self {
        case .literal: 0
        case .parameter: 1
        case .remainder: 2
        }
    }
}

private struct Route: Sendable {
    let segments: [PatternSegment]
    var handlers: [String: RouteHandler]

    /// Segment ranks; compared lexicographically, the smaller is the more specific pattern.
    var specificity: [Int] { segments.map(\.rank) }

    func match(_ path: [String]) -> [(name: String, value: String)]? {
        var captures: [(name: String, value: String)] = []
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .literal(let literal):
                guard index < path.count, path[index] == literal else { return nil }
            case .parameter(let name):
                guard index < path.count else { return nil }
                captures.append((name: name, value: path[index]))
            case .remainder(let name):
                captures.append((name: name, value: path[index...].joined(separator: "/")))
                return captures
            }
        }
        return segments.count == path.count ? captures : nil
    }
}
