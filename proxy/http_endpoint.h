// A minimal HTTP/1.1 server for /metrics, /healthz and /readyz.
//
// GET and HEAD only, one request per connection (Connection: close), the
// request head limited to kMaxRequestHead bytes, the whole exchange to
// kExchangeTimeout, and at most kMaxConnections connections at once (more
// are closed at once). Nothing a client sends can block the handlers or grow
// memory without bound. Runs on the io_context it is given.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "proxy/asio.h"

namespace remold {

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

using HttpHandler = std::function<HttpResponse()>;

struct HttpRequestHead {
  std::string method;
  std::string path;  // without the query string
};

enum class HttpParse { kIncomplete, kComplete, kBad };

// Parses the request head at the start of `data` (request line, headers,
// empty line). kIncomplete: the empty line has not arrived yet.
HttpParse ParseHttpRequestHead(std::string_view data, HttpRequestHead& out);

// The whole response, headers and (unless head_only) body.
std::string FormatHttpResponse(const HttpResponse& response, bool head_only);

class HttpEndpoint {
 public:
  static constexpr size_t kMaxRequestHead = 8192;
  static constexpr std::chrono::seconds kExchangeTimeout{5};
  static constexpr int kMaxConnections = 32;

  explicit HttpEndpoint(asio::io_context& context);
  ~HttpEndpoint();

  // Routes GET/HEAD of `path` to `handler` (called on the context's thread).
  void Route(std::string path, HttpHandler handler);

  // Binds and listens; returns the bound endpoint (port 0 resolved). Throws
  // boost::system::system_error when the address cannot be bound.
  tcp::endpoint Bind(const tcp::endpoint& endpoint);
  // Starts accepting (on the context).
  void Start();
  // Stops accepting; call on the context's thread or after it stopped.
  void Close();

  // The response to one parsed request (routing, 404, 405).
  HttpResponse Respond(const HttpRequestHead& head) const;

 private:
  awaitable<void> AcceptLoop();
  awaitable<void> Serve(Socket socket);

  asio::io_context& context_;
  Acceptor acceptor_;
  std::map<std::string, HttpHandler, std::less<>> routes_;
  std::shared_ptr<int> connections_;  // open connections; shared with their coroutines
};

}  // namespace remold
