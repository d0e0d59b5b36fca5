// An error found while decoding a client message, in MongoDB's own terms.
//
// `code` is a MongoDB server error code (common/error_code.h), so the client sees the
// same shape a mongod would send. `close_connection` is set when the framing
// itself cannot be trusted and the only safe answer is to hang up.
#pragma once

#include <string>

#include "common/error_code.h"

namespace remold::wire {

struct WireError {
  ErrorCode code;
  std::string message;
  bool close_connection = false;
};

inline WireError ProtocolError(std::string message) {
  return {error_codes::kProtocolError, std::move(message), false};
}

inline WireError InvalidBson(std::string message) {
  return {error_codes::kInvalidBSON, std::move(message), false};
}

inline WireError FatalProtocolError(std::string message) {
  return {error_codes::kProtocolError, std::move(message), true};
}

}  // namespace remold::wire
