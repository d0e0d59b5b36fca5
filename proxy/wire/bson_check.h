// Structural validation of BSON documents received from clients.
//
// A document is valid when its length prefix fits the bytes available, it
// ends in NUL, and every element (recursively) is well formed. This is what
// keeps malformed client input from reaching code that trusts BSON.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "proxy/wire/wire_error.h"

namespace remold::wire {

// Returns the length of the document at the start of `bytes` (as declared by
// its prefix) if that length is plausible (5..available), or nullopt.
std::optional<int32_t> DocumentLength(std::span<const uint8_t> bytes);

// Validates the complete document `doc` (doc.size() equals its prefix).
std::optional<WireError> ValidateDocument(std::span<const uint8_t> doc);

// The first key of `doc`, which for a command is its name; empty if none.
// `doc` must already be valid.
std::string_view FirstKey(std::span<const uint8_t> doc);

}  // namespace remold::wire
