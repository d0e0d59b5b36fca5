// WrittenNamespace: a physical collection a rule writes besides its logical
// one (a bucket collection, a computed rule's targets). The loader refuses a
// rule set in which another rule claims such a collection as its own.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "rules/namespace.h"

namespace remold {

struct WrittenNamespace {
  Namespace ns;
  // What is wrong when `ns` is the logical namespace of a rule in file
  // `owner`: one line, without the "FILE:LINE: " prefix.
  std::function<std::string(std::string_view owner)> conflict;
};

}  // namespace remold
