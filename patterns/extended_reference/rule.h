// The extended reference pattern's rule: a document copies the fields it
// shows of the document it references (an order holds its customer's name
// and shipping address), instead of joining them on every read (see
// patterns/pattern.h for what every pattern's rule provides). The rule is
// written on the referencing collection; its writes carry the copy. In
// `synced` mode, writes to the referenced collection through remold
// update the copies too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

struct ExtendedReferenceRule {
  // frozen: copied when the document is written or its reference changes,
  // never again. synced: also refreshed when the referenced document
  // changes through remold.
  enum class Mode { kFrozen, kSynced };
  // A reference to a document that does not exist: a write error, or a
  // null copy.
  enum class Missing { kError, kNull };

  Namespace logical;        // the referencing collection, for example shop.orders
  Namespace referenced;     // for example shop.customers
  std::string reference;    // logical.<reference> == referenced._id
  std::string into;         // where the copy goes: {_id, <fields>}
  std::vector<std::string> fields;  // copied from the referenced document
  Mode mode = Mode::kFrozen;
  Missing missing = Missing::kError;
  std::string rule_name;    // the rule file's stem (set by the loader), for messages

  // "extended reference rule 'orders' for shop.orders": how every message
  // of the rule names it, as the other patterns' do.
  std::string Who() const { return "extended reference rule '" + rule_name + "' for " + logical.full(); }

  static constexpr std::string_view kName = "extended_reference";
  // Parses the rule file's `extended_reference:` section (see rule.cc).
  static ExtendedReferenceRule Parse(const FileContext& ctx, const YAML::Node& section,
                                     const Namespace& logical);
  // synced: the referenced collection, whose writes remold follows (an
  // $out, $merge or rename into it would bypass the copies).
  std::vector<WrittenNamespace> Writes() const;
  // synced: the referenced collection.
  std::vector<Namespace> Watches() const;
  // "shop.orders.customer <- shop.customers (2 field(s), synced)".
  std::string Describe() const;
  std::string OnRemoval() const;
  std::string OnAddition() const;
  // How it stores the documents of its collections, as it serves now
  // (patterns/pattern.h, "Sidecars").
  std::vector<NamespaceForms> Forms() const;
  // "": the documents are stored as written, copies among their fields.
  std::string Unconverted() const { return ""; }
};

}  // namespace remold
