#include "tests/fuzz/rewrite_input.h"

#include <iterator>

#include "proxy/wire/bson_check.h"

namespace remold::fuzz {

std::optional<RewriteInput> ReadRewriteInput(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2) return std::nullopt;
  RewriteInput input;
  input.rule_set = bytes[0];
  input.caps = kCapabilities[(bytes[1] & 0x07) % std::size(kCapabilities)];
  input.as_sequence = bytes[1] & kSequenceFlag;
  bytes = bytes.subspan(2);
  std::optional<int32_t> length = wire::DocumentLength(bytes);
  if (!length) return std::nullopt;
  input.command = bytes.first(*length);
  bytes = bytes.subspan(*length);
  while (std::optional<int32_t> reply = wire::DocumentLength(bytes)) {
    std::span<const uint8_t> doc = bytes.first(*reply);
    if (wire::ValidateDocument(doc)) break;
    input.replies.push_back(Doc::FromBytes(doc));
    bytes = bytes.subspan(*reply);
  }
  return input;
}

std::vector<uint8_t> WriteRewriteInput(uint8_t rule_set, uint8_t capabilities, bool as_sequence,
                                       const Doc& command, const std::vector<Doc>& replies) {
  std::vector<uint8_t> out = {rule_set,
                              static_cast<uint8_t>(capabilities | (as_sequence ? kSequenceFlag : 0))};
  out.insert(out.end(), command.bytes().begin(), command.bytes().end());
  for (const Doc& reply : replies) out.insert(out.end(), reply.bytes().begin(), reply.bytes().end());
  return out;
}

}  // namespace remold::fuzz
