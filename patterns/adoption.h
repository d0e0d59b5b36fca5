// The optional adoption part of a pattern: how its rule serves a collection
// that may still hold documents written before the rule, in the form the
// rule's reads and writes do not expect (attributes as plain fields,
// readings in the logical collection, targets without their maintained
// values). remold never answers from half the data: `remold serve` counts
// such documents for every rule at load and reload (app/adoption.h), and
// until none is left a rule serves as WhileUnconverted says: both forms
// where it can, else refusing, with an error naming `remold migrate`, what
// would be answered wrong. A pattern provides, for its rule type R:
//
//   Adoption AdoptionOf(const R&);
//       // kAuto: remold decides from the count (the rule file says
//       // nothing); kOff: the operator says every document is in the
//       // rule's form (`migrating: false`); kByRule: the rule file says how
//       // it serves (`migrating: true`, `to_flat`)
//   R WhileUnconverted(const R&);
//       // the rule as it serves while documents written before it remain
//       // (and before the count is known)
//   std::string ServingWhileUnconverted(const R&, const std::string& migrate);
//       // what that means for the application, and what ends it, for the
//       // log: "queries match both forms ... until `remold migrate --rule
//       // products` has converted them" (`migrate`: that command, quoted)
//
// A pattern whose documents written before the rule are found in the
// logical collection names them with the rule part's Unconverted() filter
// (patterns/pattern.h). One whose rule form lives elsewhere (values
// maintained in other collections' documents) finds them with pipelines
// on the logical collection, each output document one thing not in the
// rule's form:
//
//   std::vector<UnconvertedPipeline> UnconvertedPipelines(const R&);
#pragma once

#include <concepts>
#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/adoption_mode.h"
#include "rules/namespace.h"

namespace remold {

// Documents not in the rule's form, found by a pipeline on `ns`: what
// `remold serve` and `remold check --backend` count.
struct UnconvertedPipeline {
  Namespace ns;
  std::vector<Doc> stages;
  std::string what;  // what each output document is: "target(s) of blog.posts without their values"
};

template <typename R>
concept AdoptingRule = requires(const R& rule) {
  { AdoptionOf(rule) } -> std::same_as<Adoption>;
  { WhileUnconverted(rule) } -> std::same_as<R>;
  { ServingWhileUnconverted(rule, std::string()) } -> std::same_as<std::string>;
};

template <typename R>
concept UnconvertedElsewhere = requires(const R& rule) {
  { UnconvertedPipelines(rule) } -> std::same_as<std::vector<UnconvertedPipeline>>;
};

}  // namespace remold
