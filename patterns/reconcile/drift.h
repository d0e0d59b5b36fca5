// Drift: a stored document whose maintained values (computed fields, an
// embedded subset, a reference's copy) differ from what the source data
// says they should hold. This file compares one
// document with its expectations, builds the guarded repair, and renders
// the report lines `remold reconcile` prints.
//
// Report lines (stdout), one per drifted document, then one per checked
// collection; the e2e tests parse them, so keep them stable:
//   blog.posts { "_id" : 1 }: commentCount 5, expected 7 (off by -2); lastCommentAt missing, expected 2026-01-02T00:00:00.000Z
//   blog.stats { "_id" : 9 }: target missing, expected commentCount 2, lastCommentAt 2026-01-02T00:00:00.000Z
//   shop.orders { "_id" : 4 }: total 3, cannot compute: 'price' is a string, expected a number
// with --fix each line ends with " => fixed" or " => not fixed: <why>".
//   rule comments: blog.posts: 120 checked, 3 drifted, 3 fixed, 2 orphan links
//   rule orders: shop.orders: 50 checked, 2 drifted, 0 fixed
//
// Pure: no I/O.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/reconcile/value.h"

namespace remold {

// What one field of a document should hold.
struct Expectation {
  std::string field;
  // The values the field may hold (several when `latest` has ties); the
  // first is what a repair writes. A null value means "absent": missing or
  // null stored.
  std::vector<Value> accepted;
  // A count or sum of a target no source links to may be missing.
  bool missing_ok = false;
  // Non-empty: the value cannot be computed (an expression failed).
  std::string error;
};

struct FieldDrift {
  std::string field;
  std::optional<Value> observed;  // nullopt: missing
  Value expected;                 // accepted.front(); null: absent
  std::string error;              // cannot compute
};

// The fields of `document` that do not hold what `expectations` say.
std::vector<FieldDrift> Compare(const bson_t* document, const std::vector<Expectation>& expectations);

// A field and the value it held when it was read (nullopt: missing); a
// repair only applies if the document still holds these.
struct Guard {
  std::string field;
  std::optional<Value> observed;
};

// The filter of a guarded repair: `identity` (e.g. {_id: ...}) and, per
// guard, {field: {$eq: observed}} or {field: {$exists: false}}.
Doc GuardedFilter(const Doc& identity, const std::vector<Guard>& guards);

// {$set: {non-null expected values}, $unset: {absent ones}}; fields that
// cannot be computed are left out. Empty when nothing can be repaired.
Doc RepairUpdate(const std::vector<FieldDrift>& drifts);

// The guards of the drifted fields (those that can be repaired).
std::vector<Guard> DriftGuards(const std::vector<FieldDrift>& drifts);

enum class FixOutcome {
  kNotAttempted,   // reconcile without --fix
  kFixed,
  kChanged,        // the guard matched nothing: the document changed meanwhile
  kCannotCompute,  // some field has no computable value
  kFailed,         // the backend refused the repair
};

struct DocumentDrift {
  std::string ns;        // "db.collection"
  std::string identity;  // relaxed Extended JSON, e.g. { "_id" : 1 }
  bool target_missing = false;
  std::vector<FieldDrift> fields;  // for a missing target: the values it should have
  FixOutcome outcome = FixOutcome::kNotAttempted;
  std::string failure;  // kFailed: the backend's message
};

std::string FormatDrift(const DocumentDrift& drift);

// {_id: <the document's _id>}: how drift lines and repairs name a document.
Doc IdentityOf(const bson_t* document);

// Whether a drift counts as repaired.
inline bool Repaired(const DocumentDrift& drift) { return drift.outcome == FixOutcome::kFixed; }

// The tally of one checked collection.
struct Summary {
  std::string rule;
  std::string ns;
  int64_t checked = 0;
  int64_t drifted = 0;
  int64_t fixed = 0;
  std::optional<int64_t> orphan_links;  // aggregates without create_target only

  void Count(const DocumentDrift& drift) {
    ++drifted;
    if (Repaired(drift)) ++fixed;
  }
};

std::string FormatSummary(const Summary& summary);

// The last line: "total: 5 drifted, 3 fixed, 2 not fixed".
std::string FormatTotal(int64_t drifted, int64_t fixed);

}  // namespace remold
