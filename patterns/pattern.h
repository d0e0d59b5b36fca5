// What a pattern is: one module, patterns/<name>/, with two parts.
//
// The rule part (rule.h, rule.cc; linked into the loader, names nothing of
// rewrite/) is a struct R, a validated immutable value:
//   static constexpr std::string_view kName;   // `pattern: <kName>`, and the
//                                               // section of the rule file
//   static R Parse(const FileContext&, const YAML::Node& section,
//                  const Namespace& logical);  // reports every mistake to the
//                                              // context (FILE:LINE), see
//                                              // rules/file_context.h
//   Namespace logical;                         // the collection the application names
//   std::vector<WrittenNamespace> Writes() const;  // the physical collections it
//                                                  // writes besides the logical one
//   std::string Describe() const;              // one line for `remold check`
//   std::string OnRemoval() const;             // what becomes of the stored data
//                                              // when a running proxy drops the rule
//   std::string OnAddition() const;            // what becomes of data written before,
//                                              // when a running proxy gains the rule
//   std::string Unconverted() const;           // a filter (Extended JSON) on `logical`
//                                              // matching documents still in the form
//                                              // written before the rule; "" when the
//                                              // rule stores documents as written
//
// The rewrite part (rewrite.h and the files behind it; pure, golden-tested)
// provides four overloads for R, found by the engine through the list in
// engine/rewrites.h:
//   std::optional<Plan> RewritePattern(const Command&, const RuleContext&, const R&,
//                                      const Capabilities&);
//       // the plan for a command on `logical`; nullopt: forward it unchanged
//   std::vector<Doc> ViewStages(const R&);
//       // the pipeline stages that turn stored documents into the documents
//       // the application wrote (none when they are stored as written)
//   Namespace ViewSource(const R&);
//       // the collection those stages read: where the documents are stored
//   bool PassesThrough(const R&, std::string_view field);
//       // whether every document the view makes of a stored document has
//       // the stored top-level `field`, unchanged (a filter on it may run
//       // before the view)
//
// With the view and its source, a read that reaches the collection from
// elsewhere ($lookup, $unionWith, a view defined on it) sees the documents
// the application wrote (engine/indirect_references.h).
//
// Stacks. A rule file may stack two rules on one collection (`pattern:
// [upper, lower]`): the upper rule's plans run through the lower rule
// (rewrite/stacked_plan.h); their commands on other collections go as they
// are. A pattern may be the upper rule when its plans run only commands on
// its collection that a plain collection takes; it
// says so, and names the top-level fields its own filters read from the
// documents as stored (checks and migrations filter on them directly), and
// those its plans may write besides the application's:
//   std::vector<std::string> FieldsReadAsStored() const;
//   std::vector<std::string> FieldsWritten() const;
// A pattern may be the lower rule when it answers every such command as a
// plain collection would, from one stored document per document; it says
// which top-level fields it stores as written, and which names its stored
// form uses for itself (no upper rule may write them):
//   bool StoresAsWritten(std::string_view field) const;
//   std::vector<std::string> ReservedFields() const;
//
// Fields of other collections. A rule that writes fields of documents in
// other collections (maintained values, an embedded subset) names them, so
// that the loader refuses two rules writing the same field:
//   std::vector<std::pair<Namespace, std::string>> FieldsWrittenElsewhere() const;
//
// Watching. A rule whose plans follow writes to another collection too
// (an extended reference kept in sync with the documents it copies) names
// it; commands on it then reach the rule's RewritePattern as they reach it
// for the logical collection. The loader refuses a watched collection that
// is another rule's, or that two rules watch:
//   std::vector<Namespace> Watches() const;
//
// Sidecars. A rule says how it stores the documents of each collection it
// concerns, as it serves now (rules/namespace_forms.h), so that sidecars in
// front of one backend can tell whether each reads what the others write
// (app/sidecars.h):
//   std::vector<NamespaceForms> Forms() const;
//
// The concepts below state the rule part; engine/rewrites.h states
// the rewrite part. Each is checked for every entry of the list.
#pragma once

#include <concepts>
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

template <typename R>
concept PatternRuleType = requires(const R& rule, const FileContext& ctx, const YAML::Node& section,
                                   const Namespace& logical) {
  { R::kName } -> std::convertible_to<std::string_view>;
  { R::Parse(ctx, section, logical) } -> std::same_as<R>;
  { rule.logical } -> std::convertible_to<const Namespace&>;
  { rule.Writes() } -> std::same_as<std::vector<WrittenNamespace>>;
  { rule.Describe() } -> std::same_as<std::string>;
  { rule.OnRemoval() } -> std::same_as<std::string>;
  { rule.OnAddition() } -> std::same_as<std::string>;
  { rule.Unconverted() } -> std::same_as<std::string>;
};

// The optional parts for stacks (above).
template <typename R>
concept StackUpperRule = requires(const R& rule) {
  { rule.FieldsReadAsStored() } -> std::same_as<std::vector<std::string>>;
  { rule.FieldsWritten() } -> std::same_as<std::vector<std::string>>;
};
template <typename R>
concept StackLowerRule = requires(const R& rule, std::string_view field) {
  { rule.StoresAsWritten(field) } -> std::same_as<bool>;
  { rule.ReservedFields() } -> std::same_as<std::vector<std::string>>;
};

// The optional part for fields of other collections (above).
template <typename R>
concept WritesFieldsElsewhere = requires(const R& rule) {
  { rule.FieldsWrittenElsewhere() } -> std::same_as<std::vector<std::pair<Namespace, std::string>>>;
};

// The part for sidecars (above).
template <typename R>
concept HasStoredForms = requires(const R& rule) {
  { rule.Forms() } -> std::same_as<std::vector<NamespaceForms>>;
};

// The optional part for watching (above).
template <typename R>
concept WatchingRule = requires(const R& rule) {
  { rule.Watches() } -> std::same_as<std::vector<Namespace>>;
};

}  // namespace remold
