#include "patterns/reconcile/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace remold {
namespace {

constexpr std::string_view kKey = "v";

bool IsNumber(const bson_iter_t& iter) {
  bson_type_t type = bson_iter_type(&iter);
  return type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64 || type == BSON_TYPE_DOUBLE;
}

bool IsInteger(const bson_iter_t& iter) {
  bson_type_t type = bson_iter_type(&iter);
  return type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64;
}

std::string FormatDouble(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, d);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// 2026-01-02T03:04:05.678Z (UTC).
std::string FormatDate(int64_t ms) {
  int64_t seconds = ms / 1000;
  int64_t millis = ms % 1000;
  if (millis < 0) {
    millis += 1000;
    seconds -= 1;
  }
  std::time_t time = static_cast<std::time_t>(seconds);
  std::tm utc{};
  if (!gmtime_r(&time, &utc)) return "Date(" + std::to_string(ms) + ")";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return buffer;
}

// Relaxed Extended JSON of one value: the document {"v": x} without its frame.
std::string RelaxedJson(const bson_iter_t& value) {
  Doc holder;
  AppendValue(holder.mut(), kKey, value);
  std::string json = holder.ToRelaxedJson();
  const std::string_view prefix = "{ \"v\" : ";
  const std::string_view suffix = " }";
  if (json.size() >= prefix.size() + suffix.size() && json.starts_with(prefix) && json.ends_with(suffix))
    return json.substr(prefix.size(), json.size() - prefix.size() - suffix.size());
  return json;
}

std::string Signed(const std::string& magnitude_text, bool positive) {
  return positive ? "+" + magnitude_text : magnitude_text;
}

// A difference of doubles to 12 significant digits: 2.7 - 2.4 is "0.3",
// not the 0.30000000000000027 that was computed.
std::string FormatDifference(double d) {
  if (!std::isfinite(d)) return FormatDouble(d);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.12g", d);
  return buffer;
}

}  // namespace

Value::Value() { bson_append_null(holder_.mut(), kKey.data(), static_cast<int>(kKey.size())); }

Value::Value(Doc holder) : holder_(std::move(holder)) {}

Value Value::Of(const bson_iter_t& element) {
  Doc holder;
  AppendValue(holder.mut(), kKey, element);
  return Value(std::move(holder));
}

Value Value::Of(const ComputedValue& computed) {
  Doc holder;
  AppendComputedValue(holder.mut(), kKey, computed);
  return Value(std::move(holder));
}

Value Value::Int32(int32_t number) {
  Doc holder;
  bson_append_int32(holder.mut(), kKey.data(), static_cast<int>(kKey.size()), number);
  return Value(std::move(holder));
}

bson_iter_t Value::iter() const {
  bson_iter_t iter;
  bson_iter_init(&iter, holder_.get());
  bson_iter_next(&iter);
  return iter;
}

bool Value::is_null() const {
  bson_iter_t value = iter();
  return bson_iter_type(&value) == BSON_TYPE_NULL;
}

void Value::AppendTo(bson_t* out, std::string_view key) const {
  bson_iter_t value = iter();
  AppendValue(out, key, value);
}

bool Holds(const bson_iter_t* stored, const Value& expected) {
  const bool stored_absent = stored == nullptr || bson_iter_type(stored) == BSON_TYPE_NULL;
  if (expected.is_null()) return stored_absent;
  if (stored_absent) return false;
  bson_iter_t wanted = expected.iter();
  if (std::optional<ComputedValue> computed = ValueOf(&wanted)) return HoldsValue(stored, *computed);
  return Value::Of(*stored) == expected;
}

std::string Describe(const bson_iter_t* value) {
  if (value == nullptr) return "missing";
  switch (bson_iter_type(value)) {
    case BSON_TYPE_NULL:
      return "null";
    case BSON_TYPE_BOOL:
      return bson_iter_bool(value) ? "true" : "false";
    case BSON_TYPE_INT32:
      return std::to_string(bson_iter_int32(value));
    case BSON_TYPE_INT64:
      return std::to_string(bson_iter_int64(value));
    case BSON_TYPE_DOUBLE:
      return FormatDouble(bson_iter_double(value));
    case BSON_TYPE_DATE_TIME:
      return FormatDate(bson_iter_date_time(value));
    case BSON_TYPE_UTF8: {
      uint32_t length = 0;
      const char* text = bson_iter_utf8(value, &length);
      return JsonQuote(std::string_view(text, length));
    }
    default:
      return RelaxedJson(*value);
  }
}

std::string Describe(const Value& value) {
  bson_iter_t iter = value.iter();
  return Describe(&iter);
}

std::optional<std::string> Difference(const bson_iter_t* observed, const Value& expected) {
  bson_iter_t wanted = expected.iter();
  if (observed == nullptr || !IsNumber(*observed) || !IsNumber(wanted)) return std::nullopt;
  if (IsInteger(*observed) && IsInteger(wanted)) {
    int64_t difference = 0;
    if (!__builtin_sub_overflow(bson_iter_as_int64(observed), bson_iter_as_int64(&wanted), &difference))
      return Signed(std::to_string(difference), difference > 0);
  }
  double difference = bson_iter_as_double(observed) - bson_iter_as_double(&wanted);
  return Signed(FormatDifference(difference), difference > 0);
}

std::string LinkKey(const bson_iter_t& value) {
  bson_type_t type = bson_iter_type(&value);
  if (type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64)
    return "i" + std::to_string(bson_iter_as_int64(&value));
  if (type == BSON_TYPE_DOUBLE) {
    double d = bson_iter_double(&value);
    if (std::trunc(d) == d && std::fabs(d) < 9.2e18) return "i" + std::to_string(static_cast<int64_t>(d));
  }
  Doc holder;
  AppendValue(holder.mut(), kKey, value);
  std::span<const uint8_t> bytes = holder.bytes();
  return "r" + std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace remold
