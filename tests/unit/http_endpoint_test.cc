// The status endpoint's request parsing and response framing
// (proxy/http_endpoint.h); the server itself is covered end to end.
#include <gtest/gtest.h>

#include "proxy/http_endpoint.h"

namespace remold {
namespace {

TEST(HttpParse, RequestLine) {
  HttpRequestHead head;
  EXPECT_EQ(ParseHttpRequestHead("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", head),
            HttpParse::kComplete);
  EXPECT_EQ(head.method, "GET");
  EXPECT_EQ(head.path, "/metrics");
  EXPECT_EQ(ParseHttpRequestHead("HEAD /readyz?verbose=1 HTTP/1.0\n\n", head), HttpParse::kComplete);
  EXPECT_EQ(head.method, "HEAD");
  EXPECT_EQ(head.path, "/readyz");
  EXPECT_EQ(ParseHttpRequestHead("GET http://host:9000/healthz HTTP/1.1\r\n\r\n", head),
            HttpParse::kComplete);
  EXPECT_EQ(head.path, "/healthz");
  EXPECT_EQ(ParseHttpRequestHead("GET http://host:9000 HTTP/1.1\r\n\r\n", head), HttpParse::kComplete);
  EXPECT_EQ(head.path, "/");
  EXPECT_EQ(ParseHttpRequestHead("POST /metrics HTTP/1.1\r\n\r\n", head), HttpParse::kComplete);
  EXPECT_EQ(head.method, "POST");
}

TEST(HttpParse, Incomplete) {
  HttpRequestHead head;
  EXPECT_EQ(ParseHttpRequestHead("", head), HttpParse::kIncomplete);
  EXPECT_EQ(ParseHttpRequestHead("GET /metrics HTTP/1.1\r\n", head), HttpParse::kIncomplete);
  EXPECT_EQ(ParseHttpRequestHead("GET /metrics HTTP/1.1\r\nHost: x\r\n", head),
            HttpParse::kIncomplete);
}

TEST(HttpParse, Bad) {
  HttpRequestHead head;
  for (const char* bad : {"GET\r\n\r\n", "GET /metrics\r\n\r\n", " /metrics HTTP/1.1\r\n\r\n",
                          "GET  HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n",
                          "GET metrics HTTP/1.1\r\n\r\n", "G(T /metrics HTTP/1.1\r\n\r\n",
                          "GET /a\x01 HTTP/1.1\r\n\r\n", "\x16\x03\x01 junk\r\n\r\n"}) {
    EXPECT_EQ(ParseHttpRequestHead(bad, head), HttpParse::kBad) << bad;
  }
}

TEST(HttpResponse, Framing) {
  EXPECT_EQ(FormatHttpResponse({200, "ok\n"}, false),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\nok\n");
  std::string head = FormatHttpResponse({503, "not ready: x\n"}, true);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_NE(head.find("Content-Length: 13\r\n"), std::string::npos);
  EXPECT_TRUE(head.ends_with("\r\n\r\n"));
  EXPECT_NE(FormatHttpResponse({405, ""}, false).find("Allow: GET, HEAD\r\n"), std::string::npos);
}

TEST(HttpEndpoint, Routing) {
  asio::io_context context;
  HttpEndpoint endpoint(context);
  endpoint.Route("/healthz", [] { return HttpResponse{200, "ok\n"}; });
  endpoint.Route("/boom", []() -> HttpResponse { throw std::runtime_error("x"); });
  EXPECT_EQ(endpoint.Respond({"GET", "/healthz"}).status, 200);
  EXPECT_EQ(endpoint.Respond({"HEAD", "/healthz"}).status, 200);
  EXPECT_EQ(endpoint.Respond({"GET", "/nope"}).status, 404);
  EXPECT_EQ(endpoint.Respond({"DELETE", "/healthz"}).status, 405);
  EXPECT_EQ(endpoint.Respond({"GET", "/boom"}).status, 500);
}

}  // namespace
}  // namespace remold
