// The computed pattern's rule: values derived on write, never on read
// (see patterns/pattern.h for what every pattern's rule provides).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "patterns/adoption_mode.h"
#include "patterns/expression/expression.h"
#include "rules/namespace.h"
#include "rules/namespace_forms.h"
#include "rules/written_namespace.h"

namespace YAML {
class Node;
}

namespace remold {

class FileContext;

// A field whose value is an expression over other fields of the same
// document.
struct ComputedField {
  std::string field;
  Expression expression;
  // Top-level fields of the document the expression reads.
  std::vector<std::string> inputs;
};

// A value of a target document maintained from the source documents that
// link to it.
struct MaintainedField {
  enum class Op { kCount, kSum, kMin, kMax, kLatest };
  std::string field;  // in the target
  Op op = Op::kCount;
  std::string of;     // kSum, kMin, kMax, kLatest: the source field
  std::string by;     // kLatest: the source field that orders "latest"
  std::string by_field;  // kLatest: the target's kMax field of `by`
};

// Source documents (the rule's namespace) linked to one target document
// each: source.<link_from> == target.<link_to>.
struct ComputedAggregate {
  Namespace target;
  std::string link_from;
  std::string link_to = "_id";
  bool create_target = false;  // upsert a missing target, or leave it alone
  std::vector<MaintainedField> fields;
  // Fields of the target computed from its maintained fields (an average).
  std::vector<ComputedField> derived;
  // Top-level source fields the maintained values read, the link first.
  std::vector<std::string> inputs;
  // The rule's `migrating: true`: targets may hold values from before the
  // rule (missing or wrong), so a write recomputes the values of the
  // targets it touches from their sources instead of adjusting them.
  bool migrating = false;
};

// Computed pattern: values derived on write, never on read.
//   aggregates: maintained fields of other collections' documents;
//   fields: fields of this collection's documents computed from their
//           other fields.
struct ComputedRule {
  enum class ClientWrite { kReject, kOverwrite };
  Namespace logical;
  std::vector<ComputedAggregate> aggregates;
  std::vector<ComputedField> fields;
  // What a client write of a computed field gets.
  ClientWrite on_client_write = ClientWrite::kReject;
  // `migrating: true`: values may predate the rule (see ComputedAggregate).
  bool migrating = false;
  // Whether the rule file said `migrating` (patterns/adoption.h).
  Adoption adoption = Adoption::kAuto;
  // Set while targets that sources link to hold no values yet (or before
  // remold has counted them) and the rule cannot recompute them on write
  // (it has `latest` fields): writes to the source are refused until
  // `remold reconcile --fix` has filled them.
  bool unfilled_values_left = false;
  // Whether an aggregate keeps a `latest` field (which `migrating` cannot).
  bool HasLatest() const;

  static constexpr std::string_view kName = "computed";
  // Parses the rule file's `computed:` section (a mapping; see rule.cc).
  static ComputedRule Parse(const FileContext& ctx, const YAML::Node& section,
                            const Namespace& logical);
  // The targets of the aggregates.
  std::vector<WrittenNamespace> Writes() const;
  // The maintained and derived fields of the targets.
  std::vector<std::pair<Namespace, std::string>> FieldsWrittenElsewhere() const {
    std::vector<std::pair<Namespace, std::string>> out;
    for (const ComputedAggregate& aggregate : aggregates) {
      for (const MaintainedField& f : aggregate.fields) out.emplace_back(aggregate.target, f.field);
      for (const ComputedField& f : aggregate.derived) out.emplace_back(aggregate.target, f.field);
    }
    return out;
  }
  // "db.coll -> db.target (N field(s)), M computed field(s)", for `remold check`.
  std::string Describe() const;
  // What becomes of the stored data when a running proxy drops the rule,
  // and of data written before when it gains the rule (one sentence each,
  // for the reload's warning).
  std::string OnRemoval() const;
  std::string OnAddition() const;
  // How it stores the documents of its collections, as it serves now
  // (patterns/pattern.h, "Sidecars").
  std::vector<NamespaceForms> Forms() const;
  // Documents of `logical` still in the form written before the rule, as
  // a filter (Extended JSON); "" when there is no such form.
  std::string Unconverted() const;

  // In a stack (patterns/pattern.h), the lower rule: documents are stored
  // as written, with the computed fields among them, which no upper rule
  // may write.
  bool StoresAsWritten(std::string_view) const { return true; }
  std::vector<std::string> ReservedFields() const {
    std::vector<std::string> names;
    for (const ComputedField& f : fields) names.push_back(f.field);
    return names;
  }
};

}  // namespace remold
