// The rules remold applies, as validated, immutable values.
//
// A rule belongs to one logical namespace ("db.collection") and holds the
// rule of its pattern, one of the list in patterns/patterns.h. Rules are
// built only by the loader (rules/loader.h), which has checked every field;
// code that receives a Rule may rely on it.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "patterns/patterns.h"

namespace remold {

struct Rule {
  std::string name;    // the rule file's stem, for messages and metrics
  std::string source;  // the rule file's path
  PatternRule pattern;

  const Namespace& logical() const {
    return std::visit([](const auto& p) -> const Namespace& { return p.logical; }, pattern);
  }
  // The pattern's name: "bucket", "attribute", ...
  std::string_view pattern_name() const {
    return std::visit([](const auto& p) -> std::string_view { return p.kName; }, pattern);
  }
};

}  // namespace remold
