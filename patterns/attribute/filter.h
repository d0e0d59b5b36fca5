// The attribute pattern's document and query transforms (pure).
//
// RewriteAttributeFilter turns a filter on flat fields into one on the
// {k, v} array: a predicate on an attribute becomes
//   {<array>: {$elemMatch: {<key>: "<name>", <value>: <predicate>}}}
// so one {array.k, array.v} index serves it. Where MongoDB's semantics
// differ from "some pair matches" ($exists: false, $ne, $nin, null, $not),
// the rewrite states them exactly: a missing attribute is "no pair for that
// name", and a negation is a $nor of the positive form. $and/$or/$nor
// recurse; {"<array>.<key>": X, "<array>.<value>": P} becomes $elemMatch
// when the rule says so. While the rule is `migrating`, the top-level
// clauses of a filter that name attributes match both forms, and the others
// stay at the top beside them (for an index, and for an upsert's
// equalities):
//   {<other clauses>,
//    $or: [{$and: [{<array>: {$exists: true}}, <those clauses rewritten>]},
//          {$and: [{<array>: {$exists: false}}, <those clauses as written>]}]}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/doc.h"
#include "common/error_code.h"
#include "patterns/attribute/rule.h"

namespace remold {

struct FilterRewrite {
  Doc filter;
  std::optional<std::string> error;  // set when the filter cannot be rewritten exactly
  // The refusal's code with `error`: InvalidOptions for an operator the
  // rule does not support ($where, $expr, $jsonSchema), BadValue for a
  // value it cannot store.
  ErrorCode code = error_codes::kBadValue;
};

FilterRewrite RewriteAttributeFilter(const AttributeRule& rule, const bson_t* filter);

// `filter` restricted to the documents in one stored form: those carrying
// the pair array (`in_pairs`) or those without it (the flat form).
Doc InStoredForm(const AttributeRule& rule, bool in_pairs, const Doc& filter);

// A client document with its attributes folded into the array (after any
// pairs the document already carries there). `error` says why the document
// cannot be stored: its array field is not an array, or holds something
// other than {key: <string>, value: ...} pairs, which every read would fail
// to unfold.
Doc FoldAttributes(const AttributeRule& rule, const bson_t* doc, std::string* error = nullptr);

// Which attributes a read returns, from the client's projection.
struct AttributeProjection {
  bool restricts = false;             // false: every attribute
  bool inclusion = true;              // true: only `names`; false: all but `names`
  std::vector<std::string> names;
};

// A stored document with its pairs unfolded back into fields (kept as the
// array when any pair is not exactly {key: string, value}, or a name repeats
// or clashes with a field, so nothing is lost).
Doc UnfoldAttributes(const AttributeRule& rule, const bson_t* doc,
                     const AttributeProjection& projection = {});

}  // namespace remold
