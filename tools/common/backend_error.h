// The one exception of remold's own backend connections (tools/common/):
// the server's or the link's message, and the server's code when it gave
// one.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace remold {

class BackendError : public std::runtime_error {
 public:
  explicit BackendError(const std::string& message, int32_t code = 0) : std::runtime_error(message), code_(code) {}
  int32_t code() const { return code_; }

 private:
  int32_t code_;
};

}  // namespace remold
