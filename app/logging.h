// Logging setup for `remold serve`: spdlog on stderr, as text or JSON lines.
//
//   text  2026-03-01T12:00:00.123 info session 7: open from 10.0.0.4:51234
//   json  {"t":"2026-03-01T11:00:00.123Z","level":"info","session":7,"msg":"session 7: open from 10.0.0.4:51234"}
//
// Text keeps the local time and colours the level on a terminal. JSON is one
// object per line: "t" (UTC, ISO 8601, milliseconds), "level" (trace, debug,
// info, warn, error, critical), "session" when the message is about one
// client session, and "msg". Invalid UTF-8 is replaced by U+FFFD, so every
// line parses.
//
// What is logged, by level: connection open/close and rule loads at info;
// errors (a backend lost, a request rejected, a failed reload, slow
// operations) at warn or error. Document contents and credentials are never
// logged at info or above: rewritten commands and the details of follow-up
// failures only at debug, authentication payloads never.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

namespace remold {

// Installs the default logger. format: "text" or "json"; level as
// spdlog::level::from_str reads it.
void SetUpLogging(const std::string& level, const std::string& format);

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;

 private:
  // The formatted "YYYY-MM-DDTHH:MM:SS" of cached_second_, reused within a second.
  int64_t cached_second_ = -1;
  char cached_prefix_[24] = {};
};

// Appends `text` as the inside of a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
void AppendJsonString(std::string& out, std::string_view text);

}  // namespace remold
