// The subset pattern's rule: a parent document embeds the first N of its
// children, in a declared order, while every child lives in its own
// collection (see patterns/pattern.h for what every pattern's rule
// provides). The rule is written on the child collection, whose writes
// keep each parent's array in step; reads of the parent need nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

struct SubsetSortKey {
  std::string field;
  int direction = 1;  // 1 ascending, -1 descending
};

struct SubsetRule {
  static constexpr int32_t kMaxLimit = 1000;

  Namespace logical;          // the children, for example shop.reviews
  Namespace parent;           // for example shop.products
  std::string link_from;      // child.<link_from> == parent._id
  std::string array;          // the parent's embedded array, for example recentReviews
  // Which N: the first in this order. Ties are ordered by _id in the
  // direction of the last key, so the subset is one set of documents.
  std::vector<SubsetSortKey> sort;
  int32_t limit = 10;
  // Copied into each entry after the child's _id; the sort keys among them.
  std::vector<std::string> fields;

  static constexpr std::string_view kName = "subset";
  // Parses the rule file's `subset:` section (a mapping; see rule.cc).
  static SubsetRule Parse(const FileContext& ctx, const YAML::Node& section, const Namespace& logical);
  // The parent collection: remold writes its array directly.
  std::vector<WrittenNamespace> Writes() const;
  // The parent's array.
  std::vector<std::pair<Namespace, std::string>> FieldsWrittenElsewhere() const { return {{parent, array}}; }
  // "shop.reviews -> shop.products.recentReviews (first 10 by at desc, 4 field(s))".
  std::string Describe() const;
  std::string OnRemoval() const;
  std::string OnAddition() const;
  // How it stores the documents of its collections, as it serves now
  // (patterns/pattern.h, "Sidecars").
  std::vector<NamespaceForms> Forms() const;
  // "": the children are stored as written; `remold reconcile` checks the parents.
  std::string Unconverted() const { return ""; }

  // The child fields the subset reads: the link, _id, the copied fields.
  std::vector<std::string> Inputs() const;

  // In a stack (patterns/pattern.h), the upper rule: its follow-ups read
  // the link and the copied fields as stored; it writes no child field.
  std::vector<std::string> FieldsReadAsStored() const { return Inputs(); }
  std::vector<std::string> FieldsWritten() const { return {}; }
  // {sort keys..., _id: direction of the last}: the order of the array.
  std::vector<SubsetSortKey> Order() const;
};

}  // namespace remold
