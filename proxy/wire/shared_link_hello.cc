#include "proxy/wire/shared_link_hello.h"

#include <bson/bson.h>

#include <string_view>

#include "proxy/wire/handshake_edit.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {

std::optional<std::vector<uint8_t>> SharedLinkHello(std::span<const uint8_t> message) {
  static constexpr std::string_view kDropped[] = {"client", "speculativeAuthenticate", "compression",
                                                  "topologyVersion", "maxAwaitTimeMS"};
  return EditHandshake(message, {.drop = kDropped, .clear_flags = msg_flags::kExhaustAllowed});
}

std::optional<std::chrono::milliseconds> AwaitableHelloWait(std::span<const uint8_t> command) {
  bson_t document;
  bson_iter_t iter;
  if (!bson_init_static(&document, command.data(), command.size()) || !bson_iter_init(&iter, &document))
    return std::nullopt;
  bool has_topology_version = false;
  std::optional<int64_t> wait;
  while (bson_iter_next(&iter)) {
    const std::string_view key = bson_iter_key(&iter);
    if (key == "topologyVersion") {
      has_topology_version = BSON_ITER_HOLDS_DOCUMENT(&iter);
    } else if (key == "maxAwaitTimeMS" && BSON_ITER_HOLDS_NUMBER(&iter)) {
      wait = bson_iter_as_int64(&iter);
    } else if (key == "$query" && BSON_ITER_HOLDS_DOCUMENT(&iter)) {
      uint32_t length = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&iter, &length, &data);
      return AwaitableHelloWait({data, length});
    }
  }
  if (!has_topology_version || !wait || *wait < 0) return std::nullopt;
  return std::chrono::milliseconds(*wait);
}

}  // namespace remold::wire
