@testable import KakinAdmin
import KakinCore
import Testing

@Suite struct HTMLEscaping {
    @Test func everyInterpolatedStringIsEscapedAndMarkupIsNot() {
        let reason = #"<script>alert("x")</script> & 'more'"#
        let cell: HTML = "<td>\(reason)</td>"
        #expect(cell.rendered == "<td>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;more&#39;</td>")
        let row: HTML = "<tr>\(cell)</tr>"
        #expect(row.rendered == "<tr>" + cell.rendered + "</tr>")
        let attribute: HTML = "<input value=\"\(#"" onfocus="x"#)\">"
        #expect(!attribute.rendered.contains(#"" onfocus"#))
    }

    @Test func linksKeepEachValueInsideItsSegment() {
        #expect(URLText.encode("a/b?c#d e") == "a%2Fb%3Fc%23d%20e")
        #expect(Link.customer("user:1@x", anchor: "tx-1") == "/admin/customers/user%3A1%40x#tx-1")
    }

    @Test func formsDecodePlusAsSpaceAndRefuseBrokenEscapes() {
        #expect(URLText.decodeForm("a+b%2Bc%E3%81%82") == "a b+cあ")
        #expect(URLText.decodeForm("%zz") == nil)
        #expect(URLText.decodeForm("%E3%81") == nil)
    }

    @Test func onlyPagesOfThisSiteAreFollowedBack() {
        #expect(Link.safeBack("/admin/customers/u1") == "/admin/customers/u1")
        #expect(Link.safeBack("https://evil.example/") == nil)
        #expect(Link.safeBack("//evil.example/admin/") == nil)
        #expect(Link.safeBack("/admin/\r\nSet-Cookie: x") == nil)
    }
}

@Suite struct SearchBox {
    @Test func errorIdWithItsRequestIdLooksUpThatRequest() {
        #expect(SearchQuery.targets("KKN-3004 req_ab12c") == [.errorId("KKN-3004", requestId: "req_ab12c")])
        #expect(SearchQuery.targets("kkn-3004+req_ab12c") == [.errorId("KKN-3004", requestId: "req_ab12c")])
        #expect(SearchQuery.targets("KKN-2004") == [.errorId("KKN-2004", requestId: nil)])
        #expect(SearchQuery.targets("req_ab12c") == [.requestId("req_ab12c")])
    }

    @Test func digitsAreTransactionsAndMaybeCustomersOrProcesses() {
        #expect(SearchQuery.targets("2000000123") == [.transactionId("2000000123"), .customerId("2000000123"), .purchaseProcessId("2000000123")])
    }

    @Test func orderIdsUUIDsAndPlainIds() {
        #expect(SearchQuery.targets("MK5TTTVWJH").first == .orderId("MK5TTTVWJH"))
        #expect(SearchQuery.targets("mk5tttvwjh").first == .orderId("MK5TTTVWJH"))
        let uuid = "7E3FB20B-4CDB-47CC-936D-99D65F608138"
        #expect(SearchQuery.targets(uuid).prefix(2) == [.appAccountToken(uuid.lowercased()), .notificationUUID(uuid.lowercased())])
        #expect(SearchQuery.targets("user-42") == [.customerId("user-42"), .purchaseProcessId("user-42")])
        #expect(SearchQuery.targets("retry/9f3") == [.purchaseProcessId("retry/9f3")])
        // Google Play: an order ID (a renewal's too), a purchase token.
        #expect(SearchQuery.targets("gpa.3383-1234-5678-91234..0").first == .playPurchase("GPA.3383-1234-5678-91234..0"))
        let token = "mkyarrtptcxuyegwuwywmdiz.AO-J1OxDhI8sKhgDesVRwgM1AgYzB6kanqQS80u9HdQbpMAaWOsUKbtBBjyiCe9frI1IGtZEhhLmb5XHJHI"
        #expect(SearchQuery.targets(token).first == .playPurchase(token))
        #expect(SearchQuery.targets("") == [])
        #expect(SearchQuery.targets(String(repeating: "x", count: 300)) == [])
    }
}
