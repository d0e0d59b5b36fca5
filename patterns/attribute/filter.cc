#include "patterns/attribute/filter.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_set>

#include "patterns/attribute/view.h"
#include "rewrite/filter_clauses.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

using Clauses = std::vector<Doc>;

std::string FirstComponent(std::string_view path) {
  return std::string(path.substr(0, path.find('.')));
}

bool IsNull(const bson_iter_t& it) { return BSON_ITER_HOLDS_NULL(&it); }

bool ArrayHasNull(const bson_iter_t& array) {
  bson_iter_t child, copy = array;
  if (!bson_iter_recurse(&copy, &child)) return false;
  while (bson_iter_next(&child))
    if (IsNull(child)) return true;
  return false;
}

bool ArrayAllNull(const bson_iter_t& array) {
  bson_iter_t child, copy = array;
  if (!bson_iter_recurse(&copy, &child)) return false;
  bool any = false;
  while (bson_iter_next(&child)) {
    if (!IsNull(child)) return false;
    any = true;
  }
  return any;
}

// A $size operand MongoDB takes: a whole number, not negative.
std::optional<int64_t> WholeCount(const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_NUMBER(&value) || BSON_ITER_HOLDS_DECIMAL128(&value)) return std::nullopt;
  const double d = bson_iter_as_double(&value);
  if (d < 0 || d != static_cast<double>(static_cast<int64_t>(d))) return std::nullopt;
  return static_cast<int64_t>(d);
}

bool IsOperatorDocument(const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return false;
  bson_iter_t child, copy = value;
  if (!bson_iter_recurse(&copy, &child) || !bson_iter_next(&child)) return false;
  return bson_iter_key(&child)[0] == '$';
}

class Rewriter {
 public:
  explicit Rewriter(const AttributeRule& rule) : rule_(rule) {}

  std::optional<std::string> error;

  Clauses Rewrite(const bson_t* filter) {
    Clauses clauses;
    const std::string key_path = rule_.array_field + "." + rule_.key_name;
    const std::string value_path = rule_.array_field + "." + rule_.value_name;
    auto anti_key = Find(filter, key_path);
    auto anti_value = Find(filter, value_path);
    const bool anti_pattern = rule_.fix_elem_match && anti_key && anti_value;
    if (anti_pattern) {
      // What {"a.k": X, "a.v": P} meant: one pair with k X and v P.
      Doc match;
      AppendValue(match.mut(), rule_.key_name, *anti_key);
      AppendValue(match.mut(), rule_.value_name, *anti_value);
      clauses.push_back(ElemMatch(match));
    }
    bson_iter_t it;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
      std::string_view key = bson_iter_key(&it);
      if (anti_pattern && (key == key_path || key == value_path)) continue;
      if (key == "$and" || key == "$or" || key == "$nor") {
        std::vector<Doc> branches;
        for (const Doc& branch : ArrayDocuments(it)) branches.push_back(JoinClauses(Rewrite(branch.get())));
        Doc clause;
        AppendArray(clause.mut(), key, branches);
        clauses.push_back(std::move(clause));
      } else if (key == "$where" || key == "$expr" || key == "$jsonSchema") {
        Fail("'" + std::string(key) + "' cannot be rewritten for the attribute pattern: its "
             "expressions may read attributes that are stored in '" + rule_.array_field + "'");
      } else if (key[0] != '$' && rule_.IsAttribute(FirstComponent(key))) {
        std::string name = FirstComponent(key);
        std::string sub = key.size() > name.size() ? std::string(key.substr(name.size() + 1)) : "";
        for (auto& c : AttributeClauses(name, sub, it)) clauses.push_back(std::move(c));
      } else {
        Doc clause;
        AppendValue(clause.mut(), key, it);
        clauses.push_back(std::move(clause));
      }
    }
    return clauses;
  }

 private:
  void Fail(std::string message) {
    if (!error) error = std::move(message);
  }

  Doc ElemMatch(const Doc& match) const {
    Doc elem, clause;
    AppendDoc(elem.mut(), "$elemMatch", match);
    AppendDoc(clause.mut(), rule_.array_field, elem);
    return clause;
  }

  // {array: {$elemMatch: {k: name, <path>: <condition>}}}
  Doc Pair(const std::string& name, const std::string& path, const bson_iter_t* condition,
           const Doc* condition_doc = nullptr) const {
    Doc match;
    AppendString(match.mut(), rule_.key_name, name);
    if (condition) AppendValue(match.mut(), path, *condition);
    if (condition_doc) AppendDoc(match.mut(), path, *condition_doc);
    return ElemMatch(match);
  }

  Doc Nor(Doc clause) const {
    Doc out;
    AppendArray(out.mut(), "$nor", {clause});
    return out;
  }

  Doc Or(Doc a, Doc b) const {
    Doc out;
    AppendArray(out.mut(), "$or", {a, b});
    return out;
  }

  // No pair for `name` has a value at `path`: the field is missing.
  Doc Missing(const std::string& name, const std::string& path) const {
    Doc exists;
    BSON_APPEND_BOOL(exists.mut(), "$exists", true);
    return Nor(Pair(name, path, nullptr, &exists));
  }

  // {field: {$size: n}}: the attribute's value is an array of n elements.
  // As {array: {$elemMatch: {k: name, v: {$size: n}}}} it would be exact
  // on MongoDB, but DocumentDB matches no $size inside an $elemMatch of a
  // field (docs/backends.md): the pair is found by its name, and its size
  // read by an expression over the pairs. The name, the application's and
  // possibly not valid as text, is appended as a BSON value, never spliced
  // into JSON; the rest holds only the rule's names, checked when it loaded.
  Doc Size(const std::string& name, int64_t count) const {
    const std::string pair_value = JsonQuote("$$p." + rule_.value_name);
    Doc name_is;  // {$eq: ["$$p.<key>", {$literal: name}]}
    {
      Doc literal;
      AppendString(literal.mut(), "$literal", name);
      bson_t operands;
      bson_append_array_begin(name_is.mut(), "$eq", -1, &operands);
      AppendString(&operands, "0", "$$p." + rule_.key_name);
      AppendDoc(&operands, "1", literal);
      bson_append_array_end(name_is.mut(), &operands);
    }
    const std::optional<Doc> is_array = Doc::FromJson(R"({"$isArray": )" + pair_value + "}");
    const std::optional<Doc> has_count =
        Doc::FromJson(R"({"$eq": [{"$size": {"$cond": [{"$isArray": )" + pair_value + "}, " + pair_value +
                      R"(, {"$literal": []}]}}, )" + std::to_string(count) + "]}");
    const std::optional<Doc> elements = Doc::FromJson(PairElements(rule_));
    Doc cond, filter, filtered, size, expression, clause;
    AppendArray(cond.mut(), "$and", {name_is, *is_array, *has_count});
    AppendDoc(filter.mut(), "input", *elements);
    AppendString(filter.mut(), "as", "p");
    AppendDoc(filter.mut(), "cond", cond);
    AppendDoc(filtered.mut(), "$filter", filter);
    AppendDoc(size.mut(), "$size", filtered);
    bson_t operands;
    bson_append_array_begin(expression.mut(), "$gt", -1, &operands);
    AppendDoc(&operands, "0", size);
    BSON_APPEND_INT32(&operands, "1", 0);
    bson_append_array_end(expression.mut(), &operands);
    AppendDoc(clause.mut(), "$expr", expression);
    return JoinClauses({Pair(name, rule_.value_name, nullptr, nullptr), clause});
  }

  // {field: null}: missing, or null.
  Doc NullClause(const std::string& name, const std::string& path) const {
    Doc null_value;
    BSON_APPEND_NULL(null_value.mut(), "$eq");
    return Or(Missing(name, path), Pair(name, path, nullptr, &null_value));
  }

  Clauses AttributeClauses(const std::string& name, const std::string& sub,
                           const bson_iter_t& value) {
    const std::string path = sub.empty() ? rule_.value_name : rule_.value_name + "." + sub;
    Clauses clauses;
    if (!IsOperatorDocument(value)) {
      if (IsNull(value)) clauses.push_back(NullClause(name, path));
      else clauses.push_back(Pair(name, path, &value));
      return clauses;
    }
    Doc positive;  // operators that need the attribute present
    bson_iter_t op, copy = value;
    bson_iter_recurse(&copy, &op);
    while (bson_iter_next(&op)) {
      std::string_view name_op = bson_iter_key(&op);
      if ((name_op == "$eq" || name_op == "$gte" || name_op == "$lte") && IsNull(op)) {
        // Null is alone in its type bracket: a null bound means equality
        // with null, which a missing field satisfies.
        clauses.push_back(NullClause(name, path));
      } else if (name_op == "$all" && BSON_ITER_HOLDS_ARRAY(&op) && ArrayAllNull(op)) {
        clauses.push_back(NullClause(name, path));
      } else if (name_op == "$in" && BSON_ITER_HOLDS_ARRAY(&op) && ArrayHasNull(op)) {
        Doc in;
        AppendValue(in.mut(), "$in", op);
        clauses.push_back(Or(Missing(name, path), Pair(name, path, nullptr, &in)));
      } else if (name_op == "$ne" || name_op == "$nin" || name_op == "$not") {
        // The negation of the positive form, missing attribute included.
        Doc positive_form;
        if (name_op == "$not") {
          AppendValue(positive_form.mut(), "v", op);
        } else {
          Doc inner;
          AppendValue(inner.mut(), name_op == "$ne" ? "$eq" : "$in", op);
          AppendDoc(positive_form.mut(), "v", inner);
        }
        bson_iter_t inner_it;
        bson_iter_init_find(&inner_it, positive_form.get(), "v");
        clauses.push_back(Nor(JoinClauses(AttributeClauses(name, sub, inner_it))));
      } else if (name_op == "$size" && sub.empty() && WholeCount(op).has_value()) {
        clauses.push_back(Size(name, *WholeCount(op)));
      } else if (name_op == "$exists") {
        Doc exists;
        BSON_APPEND_BOOL(exists.mut(), "$exists", true);
        if (bson_iter_as_bool(&op)) clauses.push_back(Pair(name, path, nullptr, &exists));
        else clauses.push_back(Missing(name, path));
      } else {
        AppendValue(positive.mut(), name_op, op);
      }
    }
    if (!positive.empty()) clauses.push_back(Pair(name, path, nullptr, &positive));
    return clauses;
  }

  const AttributeRule& rule_;
};

// The guard that a document reads exactly as `read` (rewrite/unchanged_guard.h,
// sent by a rule stacked above), for the document as stored: its pair form
// (attributes folded as a write would, and as reads unfold them; where the
// pair array stands among the other fields is not kept by reads), or while
// migrating either form.
Doc StoredGuard(const AttributeRule& rule, const Doc& read, std::optional<std::string>* error) {
  std::string why;
  Doc folded = FoldAttributes(rule, read.get(), &why);
  if (!why.empty()) {
    *error = "a guard on a document that cannot be stored in pair form: " + why;
    return Doc();
  }
  std::vector<Doc> stored;  // the forms the document may be stored in
  if (!rule.migrating || folded == read) stored.push_back(rule.StoresFlat() ? read : folded);
  else stored = {folded, read};
  // A document without attributes may carry an empty pair array (the
  // $unset of its last attribute leaves one), which reads unfold into
  // nothing: stored either way, it reads the same.
  if (!rule.StoresFlat() && !Find(folded.get(), rule.array_field)) {
    Doc with_empty_array = folded;
    AppendArray(with_empty_array.mut(), rule.array_field, {});
    stored.push_back(std::move(with_empty_array));
  }
  if (stored.size() == 1) return UnchangedFields(stored.front());
  Doc guard;
  if (auto id = Find(read.get(), "_id")) AppendValue(guard.mut(), "_id", *id);
  std::vector<Doc> forms;
  for (const Doc& form : stored) {
    const Doc unchanged = UnchangedFields(form);  // outlives the view Find returns
    Doc expr;
    if (auto condition = Find(unchanged.get(), "$expr")) AppendValue(expr.mut(), "$expr", *condition);
    forms.push_back(std::move(expr));
  }
  AppendArray(guard.mut(), "$or", forms);
  return guard;
}

}  // namespace

FilterRewrite RewriteAttributeFilter(const AttributeRule& rule, const bson_t* filter) {
  FilterRewrite out;
  if (std::optional<Doc> guarded = GuardedDocument(filter)) {
    out.filter = StoredGuard(rule, *guarded, &out.error);
    return out;
  }
  Rewriter rewriter(rule);
  out.filter = JoinClauses(rewriter.Rewrite(filter));
  out.error = rewriter.error;
  if (out.error) out.code = error_codes::kInvalidOptions;  // the only way a rewrite fails
  if (out.error || !rule.migrating) return out;
  const Doc original = Doc::FromBson(filter);
  if (out.filter == original) return out;
  // Both forms, for the clauses that name attributes: rewritten where the
  // pair array is, as written where it is not (a document without
  // attributes is in both forms, and both agree on it). The other clauses
  // stay beside them at the top, where an upsert takes its equalities from
  // (the _id, fixed fields) and an index serves them.
  AttributeRule pairs_only = rule;
  pairs_only.migrating.reset();
  std::vector<Doc> clauses, plain, named;
  TopLevelClauses(filter, clauses);
  // Paths into the pair array stay together ({"<array>.k": .., "<array>.v": ..}
  // is one $elemMatch with fix_elem_match).
  const std::string into_pairs = rule.array_field + ".";
  Doc pair_paths;
  std::erase_if(clauses, [&](const Doc& clause) {
    bson_iter_t it;
    if (!bson_iter_init(&it, clause.get()) || !bson_iter_next(&it)) return false;
    if (!std::string_view(bson_iter_key(&it)).starts_with(into_pairs)) return false;
    AppendValue(pair_paths.mut(), bson_iter_key(&it), it);
    return true;
  });
  if (!pair_paths.empty()) clauses.push_back(std::move(pair_paths));
  for (Doc& clause : clauses) {
    const bool names_attribute = !(JoinClauses(Rewriter(pairs_only).Rewrite(clause.get())) == clause);
    (names_attribute ? named : plain).push_back(std::move(clause));
  }
  const Doc as_written = JoinClauses(std::move(named));
  const Doc in_pairs = JoinClauses(Rewriter(pairs_only).Rewrite(as_written.get()));
  Doc mixed;
  AppendArray(mixed.mut(), "$or", {InStoredForm(rule, true, in_pairs), InStoredForm(rule, false, as_written)});
  plain.push_back(std::move(mixed));
  out.filter = JoinClauses(std::move(plain));
  return out;
}

Doc InStoredForm(const AttributeRule& rule, bool in_pairs, const Doc& filter) {
  Doc test, presence;
  BSON_APPEND_BOOL(test.mut(), "$exists", in_pairs);
  AppendDoc(presence.mut(), rule.array_field, test);
  if (filter.empty()) return presence;
  Doc both;
  AppendArray(both.mut(), "$and", {presence, filter});
  return both;
}

namespace {

// Why the pairs a document carries itself cannot be unfolded by a read
// (the view unfolds only documents with exactly a string key and a value),
// or nothing.
std::optional<std::string> PairProblem(const AttributeRule& rule, const bson_iter_t& array) {
  bson_iter_t child, copy = array;
  if (!bson_iter_recurse(&copy, &child)) return std::nullopt;
  while (bson_iter_next(&child)) {
    bool ok = BSON_ITER_HOLDS_DOCUMENT(&child);
    if (ok) {
      uint32_t length = 0;
      const uint8_t* data = nullptr;
      bson_iter_document(&child, &length, &data);
      bson_t pair;
      bson_iter_t key;
      ok = bson_init_static(&pair, data, length) &&
           bson_iter_init_find(&key, &pair, rule.key_name.c_str()) && BSON_ITER_HOLDS_UTF8(&key) &&
           Find(&pair, rule.value_name).has_value() && bson_count_keys(&pair) == 2;
    }
    if (!ok)
      return "field '" + rule.array_field + "' holds an element that is not a {" + rule.key_name +
             ": <string>, " + rule.value_name + ": <value>} pair" +
             " (with no other field)" +
             "; reads of the collection could not unfold it";
  }
  return std::nullopt;
}

}  // namespace

Doc FoldAttributes(const AttributeRule& rule, const bson_t* doc, std::string* error) {
  Doc out;
  std::vector<Doc> pairs;
  std::optional<bson_iter_t> existing;
  bson_iter_t it;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (key == rule.array_field) {
      existing = it;
    } else if (rule.IsAttribute(key)) {
      Doc pair;
      AppendString(pair.mut(), rule.key_name, key);
      AppendValue(pair.mut(), rule.value_name, it);
      pairs.push_back(std::move(pair));
    } else {
      AppendValue(out.mut(), key, it);
    }
  }
  if (existing && !BSON_ITER_HOLDS_ARRAY(&*existing)) {
    AppendValue(out.mut(), rule.array_field, *existing);  // not ours to reshape
    if (error)
      *error = pairs.empty() ? "field '" + rule.array_field + "' is not an array of {" +
                                   rule.key_name + ", " + rule.value_name +
                                   "} pairs; reads of the collection could not unfold it"
                             : "field '" + rule.array_field + "' is not an array, so the "
                               "attributes of this document have nowhere to go";
    return out;
  }
  if (existing && error) {
    if (auto problem = PairProblem(rule, *existing)) *error = *problem;
  }
  if (pairs.empty() && !existing) return out;
  bson_t array;
  bson_append_array_begin(out.mut(), rule.array_field.c_str(), -1, &array);
  uint32_t index = 0;
  char buf[16];
  const char* k;
  if (existing) {
    bson_iter_t child, copy = *existing;
    bson_iter_recurse(&copy, &child);
    while (bson_iter_next(&child)) {
      size_t len = bson_uint32_to_string(index++, &k, buf, sizeof buf);
      bson_append_iter(&array, k, static_cast<int>(len), &child);
    }
  }
  for (const Doc& pair : pairs) {
    size_t len = bson_uint32_to_string(index++, &k, buf, sizeof buf);
    bson_append_document(&array, k, static_cast<int>(len), pair.get());
  }
  bson_append_array_end(out.mut(), &array);
  // Pairs the client wrote itself must unfold: a name that repeats or is
  // also a field of the document would come back as the stored array.
  if (existing && error && error->empty() && Find(UnfoldAttributes(rule, out.get()).get(), rule.array_field))
    *error = "field '" + rule.array_field + "' holds a pair whose name repeats or is also a field of "
             "the document; reads of the collection could not unfold it";
  return out;
}

Doc UnfoldAttributes(const AttributeRule& rule, const bson_t* doc,
                     const AttributeProjection& projection) {
  auto array = Find(doc, rule.array_field);
  if (!array || !BSON_ITER_HOLDS_ARRAY(&*array)) return Doc::FromBson(doc);
  // The document's own field names, to detect a pair that would clash (a
  // hash set: a document may hold hundreds of thousands of pairs, and the
  // work must stay linear in them).
  // Sized up front from the array's bytes (a pair takes at least 16), so
  // neither rehashes nor grows while it fills.
  uint32_t array_bytes = 0;
  const uint8_t* array_data = nullptr;
  bson_iter_array(&*array, &array_bytes, &array_data);
  const size_t pairs_at_most = array_bytes / 16 + 1;
  std::unordered_set<std::string_view> taken;
  taken.reserve(pairs_at_most + 16);
  bson_iter_t it;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) taken.emplace(bson_iter_key(&it));
  // Every element must be exactly a {key: string, value} pair with a new name.
  std::vector<std::pair<std::string_view, bson_iter_t>> fields;
  fields.reserve(pairs_at_most);
  bson_iter_t child, copy = *array;
  bson_iter_recurse(&copy, &child);
  while (bson_iter_next(&child)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&child)) return Doc::FromBson(doc);
    bson_iter_t pair;
    if (!bson_iter_recurse(&child, &pair)) return Doc::FromBson(doc);
    std::optional<std::string_view> name;
    std::optional<bson_iter_t> value;
    int members = 0;
    while (bson_iter_next(&pair)) {
      ++members;
      std::string_view key = bson_iter_key(&pair);
      if (key == rule.key_name && BSON_ITER_HOLDS_UTF8(&pair)) {
        uint32_t length = 0;
        const char* s = bson_iter_utf8(&pair, &length);
        name = std::string_view(s, length);
      } else if (key == rule.value_name) {
        value = pair;
      }
    }
    if (members != 2 || !name || !value || !taken.insert(*name).second) return Doc::FromBson(doc);
    fields.emplace_back(*name, *value);
  }
  Doc out;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) {
    if (std::string_view(bson_iter_key(&it)) != rule.array_field)
      AppendValue(out.mut(), bson_iter_key(&it), it);
  }
  const std::unordered_set<std::string_view> listed(projection.names.begin(), projection.names.end());
  for (const auto& [name, value] : fields) {
    if (projection.restricts && listed.contains(name) != projection.inclusion) continue;
    AppendValue(out.mut(), name, value);
  }
  return out;
}

}  // namespace remold
