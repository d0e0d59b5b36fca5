// An error found while decoding a client message, in MongoDB's own terms.
//
// `code`/`code_name` are MongoDB server error codes, so the client sees the
// same shape a mongod would send. `close_connection` is set when the framing
// itself cannot be trusted and the only safe answer is to hang up.
#pragma once

#include <string>

namespace remold::wire {

struct WireError {
  int code = 0;
  std::string code_name;
  std::string message;
  bool close_connection = false;
};

// The error codes remold produces (values from MongoDB's error_codes.yml).
namespace error_codes {
inline constexpr int kBadValue = 2;
inline constexpr int kFailedToParse = 9;
inline constexpr int kProtocolError = 17;
inline constexpr int kInvalidBSON = 22;
inline constexpr int kHostUnreachable = 6;
inline constexpr int kCommandNotFound = 59;
inline constexpr int kBSONObjectTooLarge = 10334;
inline constexpr int kUnsupportedOpQueryCommand = 352;
}  // namespace error_codes

inline WireError ProtocolError(std::string message) {
  return {error_codes::kProtocolError, "ProtocolError", std::move(message), false};
}

inline WireError InvalidBson(std::string message) {
  return {error_codes::kInvalidBSON, "InvalidBSON", std::move(message), false};
}

inline WireError FatalProtocolError(std::string message) {
  return {error_codes::kProtocolError, "ProtocolError", std::move(message), true};
}

}  // namespace remold::wire
