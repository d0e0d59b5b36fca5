// The history pattern's rule: an application $pushes events onto a
// document forever (an order's status changes, an account's ledger). Every
// element of the array is stored as a document of its own in the history
// collection, {_id, key, parent: <the document's _id>, seq, event}, which
// the application may query directly (by parent, by time, across
// parents); the document keeps a copy of its latest `keep` elements and a
// hidden marker (patterns/array_aside/stored_form.h). The application reads
// and writes the whole array as it wrote it (see patterns/pattern.h for
// what every pattern's rule provides).
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

struct HistoryRule {
  static constexpr int32_t kMaxKeep = 10'000;

  Namespace logical;   // for example shop.orders
  std::string array;   // a top-level array field, for example statusHistory
  int32_t keep = 0;    // required: 0..kMaxKeep, the latest elements the document keeps embedded
  Namespace history;   // for example shop.orders_history
  // `migrating: to_flat`: on the way out. Writes store documents whole,
  // reads still read both forms, and `remold migrate --to flat` stores the
  // marked ones whole.
  bool to_flat = false;

  static constexpr std::string_view kName = "history";
  // Parses the rule file's `history:` section (a mapping; see rule.cc).
  static HistoryRule Parse(const FileContext& ctx, const YAML::Node& section, const Namespace& logical);
  // The history collection.
  std::vector<WrittenNamespace> Writes() const;
  // "shop.orders.statusHistory: each element in shop.orders_history, the latest 5 embedded".
  std::string Describe() const;
  std::string OnRemoval() const;
  std::string OnAddition() const;
  std::vector<NamespaceForms> Forms() const;
  // "": a document written before the rule is read as it is (an array
  // without the marker is whole); the next write that changes it moves
  // its elements to the history collection (or `remold migrate`).
  std::string Unconverted() const { return ""; }
  // How the array is laid out (patterns/array_aside/layout.h): nothing of
  // the whole embedded, one element per history document, a copy of the
  // latest `keep` in the array.
  AsideLayout Layout() const {
    return AsideLayout{"history", logical, array, history, "_remold_history", 0, keep, 1, true, to_flat};
  }
};

}  // namespace remold
