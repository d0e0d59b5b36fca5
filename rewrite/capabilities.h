// What the backend accepts, as learned from its handshake reply. Rewrites
// split their work to stay within these limits.
#pragma once

#include <cstdint>

namespace remold {

struct Capabilities {
  int32_t max_write_batch_size = 100'000;
  int32_t max_bson_object_size = 16 * 1024 * 1024;
  int32_t max_message_size_bytes = 48'000'000;
  int32_t max_wire_version = 8;
};

}  // namespace remold
