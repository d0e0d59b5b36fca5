// One connection to a backend member, with what remold knows about it:
// its compression, and in pooled mode its serial and who it authenticated
// as. Owned by a session (proxy/backend_links.h) or, between requests in
// pooled mode, by its worker's pool (proxy/backend_pool.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "proxy/message_stream.h"
#include "proxy/wire/compression.h"

namespace remold {

struct BackendLink {
  std::string address;  // "" for the direct connection
  std::unique_ptr<MessageStream> stream;
  std::chrono::steady_clock::time_point last_used;
  bool compression_offered = false;
  std::optional<wire::Compressor> compressor{};
  // Pooled mode: unique in its pool (a cursor's pin names it), and the
  // login key its connection authenticated with (wire::LoginIdentity; ""
  // for none).
  uint64_t serial = 0;
  std::string identity{};
};

}  // namespace remold
