// Whether a rule file's text is UTF-8, as YAML requires: the names it holds
// become BSON keys and strings, and Extended JSON text, which must be UTF-8
// too. Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
// beyond U+10FFFF, and no NUL byte (a text file has none).
#pragma once

#include <optional>
#include <string_view>

namespace remold {

// The line (from 1) of the first byte of `text` that is not UTF-8 text, or
// nullopt when it all is.
std::optional<int> FirstLineNotUtf8(std::string_view text);

}  // namespace remold
