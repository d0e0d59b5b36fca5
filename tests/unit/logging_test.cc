// JSON log lines (app/logging.h).
#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>

#include <chrono>
#include <string>

#include "app/logging.h"

namespace remold {
namespace {

std::string Format(spdlog::level::level_enum level, std::string_view text,
                   std::chrono::system_clock::time_point at) {
  spdlog::details::log_msg msg(at, spdlog::source_loc{}, "remold", level,
                               spdlog::string_view_t(text.data(), text.size()));
  JsonLogFormatter formatter;
  spdlog::memory_buf_t out;
  formatter.format(msg, out);
  return std::string(out.data(), out.size());
}

const auto kAt = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'772'366'400'123));

TEST(JsonLog, Line) {
  EXPECT_EQ(Format(spdlog::level::info, "listening on 127.0.0.1:27018", kAt),
            "{\"t\":\"2026-03-01T12:00:00.123Z\",\"level\":\"info\","
            "\"msg\":\"listening on 127.0.0.1:27018\"}\n");
}

TEST(JsonLog, SessionField) {
  EXPECT_EQ(Format(spdlog::level::warn, "session 42: backend connection lost", kAt),
            "{\"t\":\"2026-03-01T12:00:00.123Z\",\"level\":\"warn\",\"session\":42,"
            "\"msg\":\"session 42: backend connection lost\"}\n");
  // Only "session <digits>:" makes a field.
  EXPECT_EQ(Format(spdlog::level::err, "session x: y", kAt).find("\"session\""), std::string::npos);
  EXPECT_EQ(Format(spdlog::level::err, "session 12 y", kAt).find("\"session\""), std::string::npos);
}

TEST(JsonLog, Levels) {
  EXPECT_NE(Format(spdlog::level::err, "x", kAt).find("\"level\":\"error\""), std::string::npos);
  EXPECT_NE(Format(spdlog::level::debug, "x", kAt).find("\"level\":\"debug\""), std::string::npos);
  EXPECT_NE(Format(spdlog::level::critical, "x", kAt).find("\"level\":\"critical\""), std::string::npos);
}

TEST(JsonLog, Escaping) {
  std::string out;
  AppendJsonString(out, "a\"b\\c\nd\te\x01\x7f");
  EXPECT_EQ(out, "a\\\"b\\\\c\\nd\\te\\u0001\\u007f");
  out.clear();
  AppendJsonString(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // valid UTF-8 kept
  EXPECT_EQ(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  out.clear();
  AppendJsonString(out, "bad \xff \xc3 \xe2\x82 \xed\xa0\x80 \xc0\xaf end");  // each bad byte: U+FFFD
  EXPECT_EQ(out, "bad \\ufffd \\ufffd \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \\ufffd\\ufffd end");
}

TEST(JsonLog, TimestampAcrossSeconds) {
  JsonLogFormatter formatter;
  auto line = [&](std::chrono::system_clock::time_point at) {
    spdlog::details::log_msg msg(at, spdlog::source_loc{}, "remold", spdlog::level::info, "x");
    spdlog::memory_buf_t out;
    formatter.format(msg, out);
    return std::string(out.data(), out.size()).substr(6, 24);
  };
  EXPECT_EQ(line(kAt), "2026-03-01T12:00:00.123Z");
  EXPECT_EQ(line(kAt + std::chrono::milliseconds(900)), "2026-03-01T12:00:01.023Z");
  EXPECT_EQ(line(kAt + std::chrono::milliseconds(5)), "2026-03-01T12:00:00.128Z");
}

}  // namespace
}  // namespace remold
