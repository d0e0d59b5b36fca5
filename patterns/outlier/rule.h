// The outlier pattern's rule: most documents keep an array small, a few
// make it huge (the one book bought by two million customers). A
// document's array keeps at most `threshold` elements; what goes beyond
// is stored aside, in the overflow collection, in pages of at most
// `threshold` elements linked to the document by a hidden marker (see
// patterns/array_aside/stored_form.h). The application reads and writes the
// whole array as it wrote it (see patterns/pattern.h for what every
// pattern's rule provides).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "patterns/array_aside/layout.h"
#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

struct OutlierRule {
  static constexpr int32_t kMaxThreshold = 100'000;

  Namespace logical;   // for example shop.books
  std::string array;   // a top-level array field, for example buyers
  int32_t threshold = 0;  // required: 1..kMaxThreshold
  Namespace overflow;  // for example shop.books_overflow
  // `migrating: to_flat`: on the way out. Writes store documents whole (no
  // overflow is moved aside), reads still read both forms, and `remold
  // migrate --to flat` stores the overflowed ones whole.
  bool to_flat = false;

  static constexpr std::string_view kName = "outlier";
  // Parses the rule file's `outlier:` section (a mapping; see rule.cc).
  static OutlierRule Parse(const FileContext& ctx, const YAML::Node& section, const Namespace& logical);
  // The overflow collection.
  std::vector<WrittenNamespace> Writes() const;
  // "shop.books.buyers: 1000 embedded, the rest in shop.books_overflow".
  std::string Describe() const;
  std::string OnRemoval() const;
  std::string OnAddition() const;
  std::vector<NamespaceForms> Forms() const;
  // "": a document written before the rule is read as it is (a long array
  // without the marker is whole); the next write that grows it moves its
  // overflow aside.
  std::string Unconverted() const { return ""; }
  // How the array is laid out (patterns/array_aside/layout.h): the first
  // `threshold` elements embedded, the rest in pages of `threshold`.
  AsideLayout Layout() const {
    return AsideLayout{"outlier", logical, array, overflow, "_remold_outlier", threshold, 0, threshold, false, to_flat};
  }
};

}  // namespace remold
