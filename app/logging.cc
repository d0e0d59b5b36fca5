#include "app/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <ctime>

namespace remold {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t length;
  uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) length = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0) length = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0) length = 4, min = 0x10000;
  else return 0;
  if (i + length > s.size()) return 0;
  uint32_t code = c & (0xFF >> (length + 1));
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// "session 12: ..." -> 12.
bool SessionOf(std::string_view text, uint64_t& id) {
  constexpr std::string_view kPrefix = "session ";
  if (!text.starts_with(kPrefix)) return false;
  size_t i = kPrefix.size();
  uint64_t value = 0;
  size_t digits = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 19) {
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i, ++digits;
  }
  if (digits == 0 || i >= text.size() || text[i] != ':') return false;
  id = value;
  return true;
}

std::string_view LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    default: return "off";
  }
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t length = Utf8SequenceLength(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.data() + i, length);
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  using namespace std::chrono;
  const auto since_epoch = msg.time.time_since_epoch();
  const int64_t second = duration_cast<seconds>(since_epoch).count();
  const int64_t millis = duration_cast<milliseconds>(since_epoch).count() - second * 1000;
  if (second != cached_second_) {
    std::time_t t = static_cast<std::time_t>(second);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(cached_prefix_, sizeof cached_prefix_, "%Y-%m-%dT%H:%M:%S", &tm);
    cached_second_ = second;
  }
  std::string line;
  line.reserve(msg.payload.size() + 96);
  line += "{\"t\":\"";
  line += cached_prefix_;
  char fraction[8];
  std::snprintf(fraction, sizeof fraction, ".%03dZ", static_cast<int>(millis));
  line += fraction;
  line += "\",\"level\":\"";
  line += LevelName(msg.level);
  line += '"';
  const std::string_view text(msg.payload.data(), msg.payload.size());
  if (uint64_t session = 0; SessionOf(text, session)) {
    line += ",\"session\":";
    line += std::to_string(session);
  }
  line += ",\"msg\":\"";
  AppendJsonString(line, text);
  line += "\"}\n";
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

void SetUpLogging(const std::string& level, const std::string& format) {
  std::shared_ptr<spdlog::logger> logger;
  if (format == "json") {
    logger = spdlog::stderr_logger_mt("remold");
    logger->set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    logger = spdlog::stderr_color_mt("remold");
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace remold
