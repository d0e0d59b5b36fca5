// WrittenNamespace: a physical collection a rule writes besides its logical
// one (a bucket collection, a computed rule's targets). The loader refuses a
// rule set in which another rule claims such a collection as its own, and
// one in which two rules write the same collection, unless each writes only
// the documents of its own value of one field that all of them name (the
// types of a polymorphic collection).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "rules/namespace.h"

namespace remold {

struct WrittenNamespace {
  Namespace ns;
  // What is wrong when `ns` is the logical namespace of a rule in file
  // `owner`: one line, without the "FILE:LINE: " prefix.
  std::function<std::string(std::string_view owner)> conflict;
  // Set when the rule writes only documents whose top-level `field` is
  // `value` there, and shares the collection with rules of other values.
  // `constraint`: a filter (Extended JSON) those documents must match,
  // which the collection's validator enforces; "" for none.
  struct Share {
    std::string field;
    std::string value;
    std::string constraint;
  };
  std::optional<Share> share;
  // Set when the rule owns every document there (an outlier's pages): no
  // other rule may write the collection at all.
  bool exclusive = false;
};

}  // namespace remold
