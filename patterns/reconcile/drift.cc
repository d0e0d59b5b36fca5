#include "patterns/reconcile/drift.h"

#include <algorithm>

namespace remold {
namespace {

bool Satisfies(const bson_iter_t* stored, const Expectation& expectation) {
  if (stored == nullptr && expectation.missing_ok) return true;
  return std::any_of(expectation.accepted.begin(), expectation.accepted.end(),
                     [&](const Value& value) { return Holds(stored, value); });
}

// {field: {$eq: value}}, or {field: {$exists: false}}: $eq matches the
// stored value itself even when it is a regular expression.
void AppendGuard(bson_t* out, const Guard& guard) {
  bson_t condition;
  bson_append_document_begin(out, guard.field.data(), static_cast<int>(guard.field.size()), &condition);
  if (guard.observed) guard.observed->AppendTo(&condition, "$eq");
  else bson_append_bool(&condition, "$exists", -1, false);
  bson_append_document_end(out, &condition);
}

std::string DescribeObserved(const FieldDrift& drift) {
  if (!drift.observed) return "missing";
  return Describe(*drift.observed);
}

std::string FormatField(const FieldDrift& drift) {
  std::string text = drift.field + " " + DescribeObserved(drift);
  if (!drift.error.empty()) return text + ", cannot compute: " + drift.error;
  text += ", expected " + (drift.expected.is_null() ? std::string("missing") : Describe(drift.expected));
  if (drift.observed) {
    bson_iter_t observed = drift.observed->iter();
    if (std::optional<std::string> off = Difference(&observed, drift.expected)) text += " (off by " + *off + ")";
  }
  return text;
}

std::string FormatMissingTarget(const DocumentDrift& drift) {
  std::string text = "target missing, expected";
  bool first = true;
  for (const FieldDrift& field : drift.fields) {
    if (field.expected.is_null() || !field.error.empty()) continue;
    text += (first ? " " : ", ") + field.field + " " + Describe(field.expected);
    first = false;
  }
  return text;
}

std::string FormatOutcome(const DocumentDrift& drift) {
  switch (drift.outcome) {
    case FixOutcome::kNotAttempted:
      return "";
    case FixOutcome::kFixed:
      return " => fixed";
    case FixOutcome::kChanged:
      return " => not fixed: changed while reconciling; run again";
    case FixOutcome::kCannotCompute:
      return " => not fixed: cannot compute";
    case FixOutcome::kFailed:
      return " => not fixed: " + drift.failure;
  }
  return "";
}

}  // namespace

std::vector<FieldDrift> Compare(const bson_t* document, const std::vector<Expectation>& expectations) {
  std::vector<FieldDrift> drifts;
  for (const Expectation& expectation : expectations) {
    std::optional<bson_iter_t> stored = Find(document, expectation.field);
    const bson_iter_t* stored_ptr = stored ? &*stored : nullptr;
    if (expectation.error.empty() && Satisfies(stored_ptr, expectation)) continue;
    FieldDrift drift;
    drift.field = expectation.field;
    if (stored) drift.observed = Value::Of(*stored);
    if (!expectation.accepted.empty()) drift.expected = expectation.accepted.front();
    drift.error = expectation.error;
    drifts.push_back(std::move(drift));
  }
  return drifts;
}

Doc GuardedFilter(const Doc& identity, const std::vector<Guard>& guards) {
  Doc filter = identity;
  for (const Guard& guard : guards) AppendGuard(filter.mut(), guard);
  return filter;
}

Doc RepairUpdate(const std::vector<FieldDrift>& drifts) {
  Doc set, unset;
  for (const FieldDrift& drift : drifts) {
    if (!drift.error.empty()) continue;
    if (drift.expected.is_null()) AppendString(unset.mut(), drift.field, "");
    else drift.expected.AppendTo(set.mut(), drift.field);
  }
  Doc update;
  if (!set.empty()) AppendDoc(update.mut(), "$set", set);
  if (!unset.empty()) AppendDoc(update.mut(), "$unset", unset);
  return update;
}

std::vector<Guard> DriftGuards(const std::vector<FieldDrift>& drifts) {
  std::vector<Guard> guards;
  for (const FieldDrift& drift : drifts) {
    if (drift.error.empty()) guards.push_back({drift.field, drift.observed});
  }
  return guards;
}

std::string FormatDrift(const DocumentDrift& drift) {
  std::string text = drift.ns + " " + drift.identity + ": ";
  if (drift.target_missing) {
    text += FormatMissingTarget(drift);
  } else {
    for (size_t i = 0; i < drift.fields.size(); ++i) text += (i ? "; " : "") + FormatField(drift.fields[i]);
  }
  return text + FormatOutcome(drift);
}

Doc IdentityOf(const bson_t* document) {
  Doc identity;
  if (std::optional<bson_iter_t> id = Find(document, "_id")) AppendValue(identity.mut(), "_id", *id);
  return identity;
}

std::string FormatSummary(const Summary& summary) {
  std::string text = "rule " + summary.rule + ": " + summary.ns + ": " + std::to_string(summary.checked) +
                     " checked, " + std::to_string(summary.drifted) + " drifted, " +
                     std::to_string(summary.fixed) + " fixed";
  if (summary.orphan_links) text += ", " + std::to_string(*summary.orphan_links) + " orphan links";
  return text;
}

std::string FormatTotal(int64_t drifted, int64_t fixed) {
  return "total: " + std::to_string(drifted) + " drifted, " + std::to_string(fixed) + " fixed, " +
         std::to_string(drifted - fixed) + " not fixed";
}

}  // namespace remold
