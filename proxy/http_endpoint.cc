#include "proxy/http_endpoint.h"

#include <spdlog/spdlog.h>

namespace remold {
namespace {

std::string_view Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

bool IsTokenChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.' || c == '!' || c == '#' || c == '$' || c == '%' ||
         c == '&' || c == '\'' || c == '*' || c == '+' || c == '^' || c == '`' || c == '|' ||
         c == '~';
}

}  // namespace

HttpParse ParseHttpRequestHead(std::string_view data, HttpRequestHead& out) {
  // The head ends at an empty line (CRLF CRLF; a bare LF is tolerated).
  size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) end = data.find("\n\n");
  if (end == std::string_view::npos) return HttpParse::kIncomplete;
  size_t line_end = data.find('\n');
  std::string_view line = data.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  // METHOD SP request-target SP HTTP/1.x
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return HttpParse::kBad;
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return HttpParse::kBad;
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  for (char c : method)
    if (!IsTokenChar(c)) return HttpParse::kBad;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return HttpParse::kBad;
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return HttpParse::kBad;
  // absolute-form (http://host/path): keep the path.
  if (target.starts_with("http://") || target.starts_with("https://")) {
    size_t scheme_end = target.find("://") + 3;
    size_t slash = target.find('/', scheme_end);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target[0] != '/') return HttpParse::kBad;
  if (size_t query = target.find_first_of("?#"); query != std::string_view::npos)
    target = target.substr(0, query);
  out.method = std::string(method);
  out.path = std::string(target);
  return HttpParse::kComplete;
}

std::string FormatHttpResponse(const HttpResponse& response, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " +
                    std::string(Reason(response.status)) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Cache-Control: no-store\r\n";
  if (response.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head_only) out += response.body;
  return out;
}

HttpEndpoint::HttpEndpoint(asio::io_context& context)
    : context_(context), acceptor_(context), connections_(std::make_shared<int>(0)) {}

HttpEndpoint::~HttpEndpoint() { Close(); }

void HttpEndpoint::Route(std::string path, HttpHandler handler) {
  routes_[std::move(path)] = std::move(handler);
}

tcp::endpoint HttpEndpoint::Bind(const tcp::endpoint& endpoint) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  return acceptor_.local_endpoint();
}

void HttpEndpoint::Start() { asio::co_spawn(context_, AcceptLoop(), asio::detached); }

void HttpEndpoint::Close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

HttpResponse HttpEndpoint::Respond(const HttpRequestHead& head) const {
  if (head.method != "GET" && head.method != "HEAD")
    return {405, "only GET and HEAD are supported\n"};
  auto route = routes_.find(head.path);
  if (route == routes_.end()) return {404, "not found; try /metrics, /healthz or /readyz\n"};
  try {
    return route->second();
  } catch (const std::exception& e) {
    spdlog::error("http: {} failed: {}", head.path, e.what());
    return {500, "internal error\n"};
  }
}

awaitable<void> HttpEndpoint::AcceptLoop() {
  for (;;) {
    boost::system::error_code ec;
    Socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (!acceptor_.is_open() || ec == asio::error::operation_aborted) co_return;
      spdlog::warn("http: accept failed: {}", ec.message());
      continue;
    }
    if (*connections_ >= kMaxConnections) {
      socket.close(ec);  // too many at once: the client may retry
      continue;
    }
    asio::co_spawn(context_, Serve(std::move(socket)), asio::detached);
  }
}

awaitable<void> HttpEndpoint::Serve(Socket accepted) {
  std::shared_ptr<int> connections = connections_;
  ++*connections;
  struct Release {
    std::shared_ptr<int> count;
    ~Release() { --*count; }
  } release{connections};

  // Shared with the deadline's handler, which may outlive this frame.
  auto socket = std::make_shared<Socket>(std::move(accepted));
  SteadyTimer deadline(context_, kExchangeTimeout);
  deadline.async_wait([socket](boost::system::error_code ec) {
    if (!ec) {
      boost::system::error_code ignored;
      socket->close(ignored);
    }
  });

  std::string data;
  char buffer[1024];
  HttpRequestHead head;
  HttpResponse response;
  bool head_only = false;
  for (;;) {
    boost::system::error_code ec;
    size_t n = co_await socket->async_read_some(asio::buffer(buffer),
                                                asio::redirect_error(use_awaitable, ec));
    if (ec) {
      deadline.cancel();
      co_return;  // closed, reset, or timed out before a whole request arrived
    }
    data.append(buffer, n);
    HttpParse parsed = ParseHttpRequestHead(data, head);
    if (parsed == HttpParse::kComplete) {
      response = Respond(head);
      head_only = head.method == "HEAD";
      break;
    }
    if (parsed == HttpParse::kBad) {
      response = {400, "bad request\n"};
      break;
    }
    if (data.size() > kMaxRequestHead) {
      response = {431, "request head too large\n"};
      break;
    }
  }
  std::string bytes = FormatHttpResponse(response, head_only);
  boost::system::error_code ec;
  co_await asio::async_write(*socket, asio::buffer(bytes), asio::redirect_error(use_awaitable, ec));
  deadline.cancel();
  socket->shutdown(Socket::shutdown_both, ec);
  socket->close(ec);
}

}  // namespace remold
