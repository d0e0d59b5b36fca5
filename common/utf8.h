// Text that a client will read as a string: error messages that may quote
// what a client sent (a field name, a value), which need not be UTF-8.
//
// ValidUtf8 returns `text` unchanged when it is well-formed UTF-8 (Unicode
// 15, table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF),
// else with each byte that starts no well-formed sequence replaced by
// U+FFFD. A driver that decodes strings strictly (pymongo's default) can
// then read the message instead of failing on the whole reply.
#pragma once

#include <string>
#include <string_view>

namespace remold {

std::string ValidUtf8(std::string_view text);

}  // namespace remold
