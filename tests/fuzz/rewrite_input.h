// The input of fuzz_rewrite, as bytes:
//   byte 0    which rule set (tests/fuzz/rule_sets.h), modulo their number
//   byte 1    options: bits 0-2 the backend's limits (kCapabilities, modulo
//             its size), bit 3 send the statements as a document sequence
//   then      the client's command, one BSON document
//   then      the backend's replies to the plan's commands, BSON documents
//             one after another (tests/fuzz/reply_feed.h supplies the rest)
// Documents are cut by their length prefix; the first whose prefix does not
// fit what is left ends the list. A reply that is not valid BSON ends it
// too (the proxy drops a backend connection that sends one).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/doc.h"
#include "rewrite/capabilities.h"

namespace remold::fuzz {

// The limits a fuzz input can choose: the defaults and those of the golden
// cases' capabilities.json files. Append only: the corpus holds indexes.
inline const Capabilities kCapabilities[] = {
    Capabilities{},
    Capabilities{.max_write_batch_size = 1},
    Capabilities{.max_write_batch_size = 2},
    Capabilities{.max_bson_object_size = 20000},
    Capabilities{.max_bson_object_size = 40000},
};
inline constexpr uint8_t kSequenceFlag = 0x08;

struct RewriteInput {
  uint8_t rule_set = 0;
  Capabilities caps;
  bool as_sequence = false;
  std::span<const uint8_t> command;  // may be invalid BSON: the proxy's decoder judges it
  std::vector<Doc> replies;
};

// nullopt when the bytes hold no command document.
std::optional<RewriteInput> ReadRewriteInput(std::span<const uint8_t> bytes);

// The bytes of an input (for the seed corpus); `capabilities` indexes kCapabilities.
std::vector<uint8_t> WriteRewriteInput(uint8_t rule_set, uint8_t capabilities, bool as_sequence,
                                       const Doc& command, const std::vector<Doc>& replies);

}  // namespace remold::fuzz
