// The errors a reply document carries, found by one walk of its top-level
// elements, without parsing the rest (this runs for every reply relayed):
// whether ok is not 1, the command error's code, and where the writeErrors
// array and the writeConcernError document are.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace remold::wire {

struct ReplyErrors {
  bool failed = false;                            // an "ok" that is not 1
  std::optional<int32_t> code;                    // the command error's "code"
  std::span<const uint8_t> write_errors;          // the writeErrors array (BSON), or empty
  std::span<const uint8_t> write_concern_error;   // the writeConcernError document, or empty
};

// nullopt when `document` is not a well-formed BSON document.
std::optional<ReplyErrors> ScanReplyErrors(std::span<const uint8_t> document);

}  // namespace remold::wire
