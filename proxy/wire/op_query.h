// OP_QUERY (2004) and OP_REPLY (1): the legacy pair drivers still use for
// the first handshake (isMaster/hello on "admin.$cmd").
//
// Parse functions validate framing and documents and return views into the
// message bytes, which must outlive the view.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "proxy/wire/wire_error.h"

namespace remold::wire {

struct OpQueryView {
  int32_t flags = 0;
  std::string_view full_collection_name;
  int32_t number_to_skip = 0;
  int32_t number_to_return = 0;
  std::span<const uint8_t> query;
  std::span<const uint8_t> return_fields_selector;  // empty when absent

  // "admin.$cmd" -> true: the query is a command.
  bool is_command() const;
};

std::optional<WireError> ParseOpQuery(std::span<const uint8_t> message, OpQueryView& out);

struct OpReplyView {
  int32_t response_flags = 0;
  int64_t cursor_id = 0;
  int32_t starting_from = 0;
  std::vector<std::span<const uint8_t>> documents;
};

std::optional<WireError> ParseOpReply(std::span<const uint8_t> message, OpReplyView& out);

// Encodes an OP_REPLY carrying `documents` (the command reply is one).
std::vector<uint8_t> EncodeOpReply(int32_t request_id, int32_t response_to,
                                   const OpReplyView& reply);

}  // namespace remold::wire
