// The `extended_reference:` section of a rule file -> ExtendedReferenceRule.
//
//   extended_reference:
//     reference: customerId              # order.customerId == customer._id
//     referenced: customers              # "collection" (same database) or "db.collection"
//     into: customer                     # the copy: {_id, name, shippingAddress}
//     fields: [name, shippingAddress]    # copied from the customer
//     mode: frozen                       # or synced
//     missing: error                     # or null
//
// Mistakes are reported through the FileContext (rules/file_context.h),
// every one of them.
#include "patterns/extended_reference/rule.h"

#include <yaml-cpp/yaml.h>


#include "rules/copied_fields.h"
#include "rules/file_context.h"

namespace remold {

ExtendedReferenceRule ExtendedReferenceRule::Parse(const FileContext& ctx, const YAML::Node& s,
                                                   const Namespace& logical) {
  ctx.CheckKeys(s, "'extended_reference'", {"reference", "referenced", "into", "fields", "mode", "missing"});
  ExtendedReferenceRule rule;
  rule.logical = logical;
  ctx.Step([&] {
    std::string referenced = ctx.String(s, "referenced", "'extended_reference'", "a collection name");
    if (referenced.empty() || referenced.find('$') != std::string::npos)
      ctx.Fail(s["referenced"], "referenced '" + referenced + "' must be 'collection' or 'database.collection'");
    rule.referenced = referenced.find('.') == std::string::npos
                          ? Namespace{logical.db, referenced}
                          : ParseNamespace(ctx, s["referenced"], referenced);
    if (rule.referenced == logical)
      ctx.Fail(s["referenced"], "the referenced collection is the rule's own, expected the collection whose "
                                "documents are copied");
  });
  const bool reference_ok = ctx.Step([&] {
    rule.reference = ctx.String(s, "reference", "'extended_reference'",
                                "the field holding the referenced document's _id");
    if (!ctx.CheckFieldName(s["reference"], rule.reference, "reference")) return;
    if (rule.reference == "_id")
      ctx.Fail(s["reference"], "the reference is the document's own _id, expected the field that holds the "
                               "referenced document's _id");
  });
  const bool into_ok = ctx.Step([&] {
    rule.into = ctx.String(s, "into", "'extended_reference'", "the field that holds the copy");
    if (!ctx.CheckFieldName(s["into"], rule.into, "into")) return;
    if (rule.into == "_id") ctx.Fail(s["into"], "the copy cannot go into _id");
  });
  if (reference_ok && into_ok && rule.into == rule.reference)
    ctx.Report(s["into"], "the copy goes into '" + rule.into + "', the reference itself; expected another field");
  ctx.Step([&] {
    rule.fields = ParseCopiedFields(ctx, s, "'extended_reference'", "the fields copied", "it is the reference");
  });
  ctx.Step([&] {
    const std::string mode = ctx.OptionalString(s, "mode", "frozen", "frozen or synced");
    if (mode == "frozen") rule.mode = Mode::kFrozen;
    else if (mode == "synced") rule.mode = Mode::kSynced;
    else ctx.Fail(s["mode"], "'mode' is '" + mode + "', expected frozen or synced");
  });
  ctx.Step([&] {
    // `missing: null` is YAML's null, as is `missing: ~`.
    if (s["missing"] && TypeOf(s["missing"]) == YamlType::kNull) {
      rule.missing = Missing::kNull;
      return;
    }
    const std::string missing = ctx.OptionalString(s, "missing", "error", "error or null");
    if (missing == "error") rule.missing = Missing::kError;
    else if (missing == "null") rule.missing = Missing::kNull;
    else ctx.Fail(s["missing"], "'missing' is '" + missing + "', expected error or null");
  });
  return rule;
}

std::vector<WrittenNamespace> ExtendedReferenceRule::Writes() const {
  if (mode != Mode::kSynced) return {};
  return {{referenced, [referenced = referenced](std::string_view owner) {
             return "referenced collection '" + referenced.full() + "' has a rule of its own in " +
                    std::string(owner) +
                    "; a synced reference follows its writes directly, expected a plain collection";
           }}};
}

std::vector<Namespace> ExtendedReferenceRule::Watches() const {
  if (mode != Mode::kSynced) return {};
  return {referenced};
}

std::string ExtendedReferenceRule::Describe() const {
  return logical.full() + "." + into + " <- " + referenced.full() + " (" + std::to_string(fields.size()) +
         " field(s), " + (mode == Mode::kSynced ? "synced" : "frozen") + ")";
}

std::string ExtendedReferenceRule::OnRemoval() const {
  return "the copies in " + logical.full() + "." + into + " stay as they are and are no longer written" +
         (mode == Mode::kSynced ? " or synced; once the rule is back, run `remold reconcile` to repair them"
                                : "");
}

std::string ExtendedReferenceRule::OnAddition() const {
  return "documents written before carry no copy: run `remold reconcile --fix` to add " + logical.full() + "." +
         into + " from " + referenced.full();
}

std::vector<NamespaceForms> ExtendedReferenceRule::Forms() const {
  std::string copy = referenced.full() + " by " + reference + " into " + into + " [";
  for (size_t i = 0; i < fields.size(); ++i) copy += (i ? ", " : "") + fields[i];
  copy += std::string("] ") + (mode == Mode::kSynced ? "synced" : "frozen");
  const std::string form = std::string(kPlainForm) + "+copies of " + copy;
  std::vector<NamespaceForms> forms{{logical, form, {form}}};
  // A synced rule also follows the writes of the referenced collection.
  if (mode == Mode::kSynced) {
    const std::string followed = std::string(kPlainForm) + "+copied into " + logical.full() + " as " + copy;
    forms.push_back({referenced, followed, {followed}});
  }
  return forms;
}

}  // namespace remold
