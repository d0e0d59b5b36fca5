#include "patterns/attribute/update.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "patterns/attribute/migration.h"
#include "patterns/attribute/rewrite.h"
#include "common/utf8.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/filter_clauses.h"
#include "rewrite/plan.h"
#include "rewrite/unchanged_guard.h"

namespace remold {
namespace {

// updateMany with attribute operators pins the documents it matched first;
// past this many, it is refused before anything changes.
constexpr int64_t kMaxPinnedDocuments = 100'000;
// While migrating, an updateMany converts the documents it matches in
// batches, read again until none is left: at most this many batches (as
// many documents as it may pin).
constexpr int64_t kConversionBatch = 1'000;
constexpr int kMaxConversionRounds = kMaxPinnedDocuments / kConversionBatch;

std::string FirstComponent(std::string_view path) {
  return std::string(path.substr(0, path.find('.')));
}

// The documents step 1 read: those it pinned.
std::vector<Doc> PinnedIds(const Doc& find_reply) { return StoredDocuments(find_reply); }

// Steps 2-4 of AttributeUpdate, built from the _ids step 1 found, and
// the client's reply from all their replies. Holds copies: it outlives
// the rewrite.
struct UpdateSteps {
  AttributeRule rule;
  Command command;
  Doc statement;
  Doc filter;  // the rewritten client filter
  Doc fixed_ops;
  std::vector<AttributeOp> ops;
  bool multi;

  bool HasPushes() const {
    return std::any_of(ops.begin(), ops.end(), [](const AttributeOp& o) { return o.op != "$unset"; });
  }

  // Whether step 3 changes the value step 2 pushed for `op` (a zero of the
  // operand's type, see AppendNeutral): $inc of a number that is not zero
  // (NaN included), $mul by NaN. A document pushed for such an op is then
  // modified by step 3 too, and counted there.
  static bool ApplyChangesNeutral(const AttributeOp& op) {
    if (op.op != "$inc" && op.op != "$mul") return false;
    bson_iter_t v;
    if (!bson_iter_init_find(&v, op.value.get(), "v")) return false;
    const bool is_nan = BSON_ITER_HOLDS_DOUBLE(&v) ? std::isnan(bson_iter_double(&v))
                        : BSON_ITER_HOLDS_DECIMAL128(&v) ? DecimalText(v).find("NaN") != std::string::npos
                                                          : false;
    if (op.op == "$mul") return is_nan;
    if (BSON_ITER_HOLDS_INT32(&v) || BSON_ITER_HOLDS_INT64(&v)) return bson_iter_as_int64(&v) != 0;
    if (BSON_ITER_HOLDS_DOUBLE(&v)) return is_nan || bson_iter_double(&v) != 0.0;
    if (BSON_ITER_HOLDS_DECIMAL128(&v)) return !IsDecimalZero(DecimalText(v));
    return true;
  }

  static std::string DecimalText(const bson_iter_t& v) {
    bson_decimal128_t d;
    bson_iter_decimal128(&v, &d);
    char text[BSON_DECIMAL128_STRING];
    bson_decimal128_to_string(&d, text);
    return text;
  }

  // "0", "-0.00", "0E+3": digits before the exponent all zero.
  static bool IsDecimalZero(std::string_view text) {
    if (!text.empty() && text[0] == '-') text.remove_prefix(1);
    const std::string_view digits = text.substr(0, text.find('E'));
    return !digits.empty() && digits.find_first_not_of("0.") == std::string_view::npos;
  }

  // Whether the documents step 2 modified are all counted by step 3: every
  // op that pushes changes its pushed value there. (Otherwise step 2's
  // count is added, at most n: exact when each document gained pairs or
  // had its others changed, not both.)
  bool PushesCountedByApply() const {
    return std::all_of(ops.begin(), ops.end(),
                       [](const AttributeOp& o) { return o.op == "$unset" || ApplyChangesNeutral(o); });
  }

  Doc Pinned(const std::vector<Doc>& ids, bool still_matching) const {
    Doc by_id = IdIn(ids);
    if (!still_matching || filter.empty()) return by_id;
    Doc both;
    AppendArray(both.mut(), "$and", {by_id, filter});
    return both;
  }

  BackendCommand UpdateCommand(std::vector<Doc> statements, ArgumentTarget target) const {
    return ::remold::UpdateCommand(command, target, rule.logical, true, std::move(statements));
  }

  static Doc Statement(const Doc& q, const Doc& u, bool multi) {
    Doc statement;
    AppendDoc(statement.mut(), "q", q);
    AppendDoc(statement.mut(), "u", u);
    BSON_APPEND_BOOL(statement.mut(), "multi", multi);
    return statement;
  }

  // The commands of steps 2-4 for the pinned documents: the pushes, the
  // client's write, the pull of $unset attributes (each may be absent).
  struct Writes {
    std::optional<BackendCommand> push, apply, pull;
  };

  // Steps 2-4, one after the other: a write error in the push or in the
  // client's write ends the plan there, after taking back the pairs pushed
  // (a failing statement changes nothing, as on a plain collection).
  Step Next(std::span<const Doc> replies) const {
    std::vector<Doc> ids = PinnedIds(replies.front());
    if (ids.empty() || ids.size() > static_cast<size_t>(kMaxPinnedDocuments)) return Step{};
    auto writes = std::make_shared<Writes>(Commands(ids));
    auto self = std::make_shared<UpdateSteps>(*this);
    auto after_apply = [self, writes](std::span<const Doc> replies) {
      if (HasWriteErrors(replies.back())) return self->TakeBack(replies.front());
      if (!writes->pull) return Step{};
      return Step{{*writes->pull}, {}};
    };
    auto apply = [writes, after_apply](std::span<const Doc> replies) {
      if (replies.size() > 1 && HasWriteErrors(replies.back())) return Step{};  // the push failed
      if (!writes->apply) return writes->pull ? Step{{*writes->pull}, {}} : Step{};
      return Step{{*writes->apply}, after_apply};
    };
    if (writes->push) return Step{{*writes->push}, apply};
    return apply(replies);
  }

  static bool HasWriteErrors(const Doc& reply) {
    auto errors = ::remold::Find(reply.get(), "writeErrors");
    return errors && BSON_ITER_HOLDS_ARRAY(&*errors) && !ArrayDocuments(*errors).empty();
  }

  // After the client's write failed: pull each pushed pair, still holding
  // the value pushed, from the pinned documents that lacked its attribute
  // when step 1 read them. Only for a single-document update outside a
  // transaction: a transaction's write error aborts it (the pushes with
  // it), and an updateMany that fails leaves open which documents it had
  // changed, a pushed pair among them possibly updated since.
  Step TakeBack(const Doc& find_reply) const {
    if (multi || InTransaction(command)) return Step{};
    std::vector<Doc> statements;
    for (const Doc& doc : PinnedIds(find_reply)) {
      std::vector<std::string> present;
      if (auto pairs = ::remold::Find(doc.get(), rule.array_field); pairs && BSON_ITER_HOLDS_ARRAY(&*pairs))
        for (const Doc& pair : ArrayDocuments(*pairs))
          if (auto key = FindString(pair.get(), rule.key_name.c_str())) present.push_back(*key);
      bson_iter_t id;
      bson_iter_init_find(&id, doc.get(), "_id");
      for (const AttributeOp& op : ops) {
        if (op.op == "$unset" || std::find(present.begin(), present.end(), op.name) != present.end()) continue;
        Doc q, pair, pull_field, pull;
        AppendValue(q.mut(), "_id", id);
        AppendString(pair.mut(), rule.key_name, op.name);
        AppendNeutral(pair.mut(), op);
        AppendDoc(pull_field.mut(), rule.array_field, pair);
        AppendDoc(pull.mut(), "$pull", pull_field);
        statements.push_back(Statement(q, pull, false));
      }
    }
    if (statements.empty()) return Step{};
    return Step{{UpdateCommand(std::move(statements), ArgumentTarget::kPreparatoryWrite)}, {}};
  }

  // The value pushed for a missing attribute: $set/$min/$max: the operand
  // (what they set on a missing field); $inc/$mul: 0 of the operand's type
  // (the operator then gives what it gives a missing field).
  void AppendNeutral(bson_t* pair, const AttributeOp& op) const {
    bson_iter_t v;
    bson_iter_init_find(&v, op.value.get(), "v");
    if (op.op != "$inc" && op.op != "$mul") {
      AppendValue(pair, rule.value_name, v);
      return;
    }
    // A zero of the operand's type, which is what $mul gives a missing
    // field and what $inc adds to: step 3 leaves it as pushed unless the
    // operand changes it (ApplyChangesNeutral), whatever an engine takes
    // for a change between numeric types.
    const char* name = rule.value_name.c_str();
    if (BSON_ITER_HOLDS_INT64(&v)) {
      BSON_APPEND_INT64(pair, name, 0);
    } else if (BSON_ITER_HOLDS_DOUBLE(&v)) {
      BSON_APPEND_DOUBLE(pair, name, 0.0);
    } else if (BSON_ITER_HOLDS_DECIMAL128(&v)) {
      bson_decimal128_t zero;
      bson_decimal128_from_string("0", &zero);
      BSON_APPEND_DECIMAL128(pair, name, &zero);
    } else {
      BSON_APPEND_INT32(pair, name, 0);
    }
  }

  Writes Commands(const std::vector<Doc>& ids) const {
    Writes next;
    const Doc still_matching = Pinned(ids, true);

    std::vector<Doc> pushes;
    std::vector<std::pair<std::string, Doc>> by_op;  // op -> {path: value}
    auto op_doc = [&](const std::string& op) -> Doc& {
      for (auto& [name, doc] : by_op)
        if (name == op) return doc;
      by_op.emplace_back(op, Doc());
      return by_op.back().second;
    };
    // The operators in the client's order (a backend applying them in that
    // order reports the same failing one first).
    if (auto client_u = FindDocument(statement.get(), "u")) {
      bson_iter_t op_it;
      bson_iter_init(&op_it, client_u->get());
      while (bson_iter_next(&op_it)) op_doc(bson_iter_key(&op_it));
    }
    std::vector<Doc> array_filters;
    std::vector<std::string> unset;
    for (size_t i = 0; i < ops.size(); ++i) {
      const AttributeOp& op = ops[i];
      bson_iter_t v;
      bson_iter_init_find(&v, op.value.get(), "v");
      if (op.op == "$unset") {
        unset.push_back(op.name);
        continue;
      }
      Doc pair, pair_match, elem, has, missing, q, push_field, push;
      AppendString(pair.mut(), rule.key_name, op.name);
      AppendNeutral(pair.mut(), op);
      AppendString(pair_match.mut(), rule.key_name, op.name);
      AppendDoc(elem.mut(), "$elemMatch", pair_match);
      AppendDoc(has.mut(), rule.array_field, elem);
      AppendArray(missing.mut(), "$nor", {has});
      AppendArray(q.mut(), "$and", {still_matching, missing});
      AppendDoc(push_field.mut(), rule.array_field, pair);
      AppendDoc(push.mut(), "$push", push_field);
      pushes.push_back(Statement(q, push, multi));

      const std::string name = "remold" + std::to_string(i);
      AppendValue(op_doc(op.op).mut(), rule.array_field + ".$[" + name + "]." + rule.value_name, v);
      Doc array_filter;
      AppendString(array_filter.mut(), name + "." + rule.key_name, op.name);
      array_filters.push_back(std::move(array_filter));
    }
    bson_iter_t fixed_it;
    bson_iter_init(&fixed_it, fixed_ops.get());
    while (bson_iter_next(&fixed_it)) {
      Doc part = *FindDocument(fixed_ops.get(), bson_iter_key(&fixed_it));
      bson_concat(op_doc(bson_iter_key(&fixed_it)).mut(), part.get());
    }
    if (!pushes.empty()) next.push = UpdateCommand(std::move(pushes), ArgumentTarget::kPreparatoryWrite);
    std::erase_if(by_op, [](const auto& entry) { return entry.second.empty(); });
    if (!by_op.empty()) {
      Doc u;
      for (const auto& [op, doc] : by_op) AppendDoc(u.mut(), op, doc);
      Doc apply = Statement(still_matching, u, multi);
      if (auto client_filters = ::remold::Find(statement.get(), "arrayFilters"))
        for (Doc& f : ArrayDocuments(*client_filters)) array_filters.push_back(std::move(f));
      if (!array_filters.empty()) AppendArray(apply.mut(), "arrayFilters", array_filters);
      next.apply = UpdateCommand({apply}, ArgumentTarget::kWrite);
    }
    if (!unset.empty()) {
      Doc names, in, pull_field, pull;
      bson_t array;
      BSON_APPEND_ARRAY_BEGIN(in.mut(), "$in", &array);
      for (size_t i = 0; i < unset.size(); ++i)
        BSON_APPEND_UTF8(&array, std::to_string(i).c_str(), unset[i].c_str());
      bson_append_array_end(in.mut(), &array);
      AppendDoc(names.mut(), rule.key_name, in);
      AppendDoc(pull_field.mut(), rule.array_field, names);
      AppendDoc(pull.mut(), "$pull", pull_field);
      // The client's write when there is nothing else; otherwise it
      // follows it, to the same documents (their filter may have changed).
      const bool is_client_write = by_op.empty();
      next.pull = UpdateCommand({Statement(is_client_write ? still_matching : Pinned(ids, false), pull, multi)},
                                is_client_write ? ArgumentTarget::kWrite : ArgumentTarget::kPreparatoryWrite);
    }
    return next;
  }

  // The backend names the pair's value field ("... has the field 'v' of
  // non-numeric type string"); the application knows the attribute.
  std::string NamingAttributes(std::string message) const {
    std::vector<std::string> names;
    for (const AttributeOp& op : ops)
      if (op.op != "$unset" && std::find(names.begin(), names.end(), op.name) == names.end())
        names.push_back(op.name);
    if (names.empty()) return message;
    bool fixed_named_alike = false;  // a fixed field called like the value field
    bson_iter_t op_it;
    bson_iter_init(&op_it, fixed_ops.get());
    while (bson_iter_next(&op_it))
      ForEachChild(op_it, [&](std::string_view path, const bson_iter_t&) {
        std::string_view last = path.substr(path.rfind('.') + 1);
        fixed_named_alike = fixed_named_alike || last == rule.value_name;
      });
    if (fixed_named_alike) return message;
    std::string replacement = "'" + names.front() + "'";
    if (names.size() > 1) {
      replacement = "'" + rule.value_name + "' (of one of the attributes";
      for (size_t i = 0; i < names.size(); ++i) replacement += (i ? ", '" : " '") + names[i] + "'";
      replacement += ")";
    }
    const std::string internal = "field '" + rule.value_name + "'";
    for (size_t at = message.find(internal); at != std::string::npos;
         at = message.find(internal, at + replacement.size()))
      message.replace(at + 6, internal.size() - 6, replacement);
    return message;
  }

  // n and nModified come from the client's write (step 3, or the pull
  // when only attributes are unset); nModified adds documents that only
  // gained a pair in step 2 (PushesCountedByApply), at most n.
  ShapedReply Shape(std::span<const Doc> replies) const {
    ShapedReply out;
    std::vector<Doc> ids = PinnedIds(replies.front());
    if (ids.size() > static_cast<size_t>(kMaxPinnedDocuments)) {
      out.reply = ErrorReply(error_codes::kInvalidOptions,
                             "updateMany with attribute operators matched more than " +
                                 std::to_string(kMaxPinnedDocuments) +
                                 " documents; nothing was changed: narrow the filter");
      return out;
    }
    std::span<const Doc> writes = replies.subspan(1);
    const size_t push_index = 0;
    const size_t write_index = HasPushes() ? 1 : 0;
    int64_t n = 0, modified = 0;
    std::optional<Doc> write_error, write_concern_error;
    for (size_t i = 0; i < writes.size(); ++i) {
      const Doc& reply = writes[i];
      if (auto we = ::remold::Find(reply.get(), "writeErrors"); we && BSON_ITER_HOLDS_ARRAY(&*we)) {
        std::vector<Doc> errors = ArrayDocuments(*we);
        if (!errors.empty() && !write_error) {
          Doc e;
          BSON_APPEND_INT32(e.mut(), "index", 0);
          bson_iter_t it;
          bson_iter_init(&it, errors.front().get());
          while (bson_iter_next(&it)) {
            std::string_view key = bson_iter_key(&it);
            if (key == "errmsg" && BSON_ITER_HOLDS_UTF8(&it))
              AppendString(e.mut(), key, NamingAttributes(bson_iter_utf8(&it, nullptr)));
            else if (key != "index")
              AppendValue(e.mut(), key, it);
          }
          write_error = std::move(e);
        }
      }
      if (auto wce = FindDocument(reply.get(), "writeConcernError")) write_concern_error = wce;
      if (i == write_index) {
        n = FindInteger(reply.get(), "n").value_or(0);
        modified += FindInteger(reply.get(), "nModified").value_or(0);
      } else if (i == push_index && HasPushes() && !PushesCountedByApply()) {
        modified += FindInteger(reply.get(), "nModified").value_or(0);
      }
    }
    if (write_error) n = modified = 0;  // the write failed: nothing counts
    bson_t* r = out.reply.mut();
    BSON_APPEND_INT32(r, "n", static_cast<int32_t>(n));
    BSON_APPEND_INT32(r, "nModified", static_cast<int32_t>(std::min(n, modified)));
    if (write_error) AppendArray(r, "writeErrors", {*write_error});
    if (write_concern_error) AppendDoc(r, "writeConcernError", *write_concern_error);
    for (const char* key : {"$clusterTime", "operationTime"}) {
      if (auto v = ::remold::Find(replies.back().get(), key)) AppendValue(r, key, *v);
    }
    BSON_APPEND_DOUBLE(r, "ok", 1.0);
    return out;
  }
};



}  // namespace

// Splits update operators into those on fixed fields and attribute ops.
std::optional<Refusal> SplitAttributeUpdate(const AttributeRule& a_, const Doc& u, Doc& fixed,
                                                  std::vector<AttributeOp>& ops) {
  auto illegal = [](std::string message) {
    return Refusal{error_codes::kInvalidOptions, std::move(message)};
  };
  static const std::vector<std::string> kSupported = {"$set", "$unset", "$inc", "$min", "$max", "$mul"};
  bson_iter_t op_it;
  bson_iter_init(&op_it, u.get());
  while (bson_iter_next(&op_it)) {
    std::string op = bson_iter_key(&op_it);
    if (!BSON_ITER_HOLDS_DOCUMENT(&op_it))
      return Refusal{error_codes::kFailedToParse, "update operator '" + op + "' needs a document"};
    Doc fixed_part;
    bson_iter_t field;
    bson_iter_recurse(&op_it, &field);
    while (bson_iter_next(&field)) {
      std::string path = bson_iter_key(&field);
      std::string name = FirstComponent(path);
      if (name == a_.array_field)
        return Refusal{error_codes::kBadValue,
                       "field '" + a_.array_field + "' is reserved: it holds the attributes (update '" +
                           path + "' refused); update the attributes by name"};
      if (op == "$rename" && BSON_ITER_HOLDS_UTF8(&field) &&
          FirstComponent(bson_iter_utf8(&field, nullptr)) == a_.array_field)
        return Refusal{error_codes::kBadValue,
                       "field '" + a_.array_field + "' is reserved: it holds the attributes ($rename to '" +
                           std::string(bson_iter_utf8(&field, nullptr)) + "' refused)"};
      if (!a_.IsAttribute(name)) {
        AppendValue(fixed_part.mut(), path, field);
        continue;
      }
      if (std::find(kSupported.begin(), kSupported.end(), op) == kSupported.end())
        return illegal("update operator '" + op + "' on attribute '" + name +
                       "' is not supported (supported: $set, $unset, $inc, $min, $max, $mul)");
      if (path != name)
        return illegal("update of '" + path + "' inside attribute '" + name +
                       "' is not supported: set the whole attribute");
      if ((op == "$inc" || op == "$mul") && !BSON_ITER_HOLDS_NUMBER(&field)) {
        Doc shown;
        AppendValue(shown.mut(), "v", field);
        std::string json = shown.ToRelaxedJson();  // { "v" : <value> }, or "" (a string not UTF-8)
        std::string value = json.size() > 10 ? json.substr(8, json.size() - 10) : "a value JSON cannot show";
        return Refusal{error_codes::kTypeMismatch,
                       "Cannot " + std::string(op == "$inc" ? "increment" : "multiply") +
                           " with non-numeric argument: {" + name + ": " + value + "}"};
      }
      Doc value;
      AppendValue(value.mut(), "v", field);
      ops.push_back({op, name, std::move(value)});
    }
    if (!fixed_part.empty()) AppendDoc(fixed.mut(), op, fixed_part);
  }
  return std::nullopt;
}

// What mongod answers for a statement it rejects: a write error at the
// statement's index, nothing changed.
Plan StatementWriteError(size_t index, ErrorCode code, const std::string& message) {
  Doc reply, error;
  BSON_APPEND_INT32(reply.mut(), "n", 0);
  BSON_APPEND_INT32(reply.mut(), "nModified", 0);
  BSON_APPEND_INT32(error.mut(), "index", static_cast<int32_t>(index));
  BSON_APPEND_INT32(error.mut(), "code", code.value);
  AppendString(error.mut(), "errmsg", ValidUtf8(message));
  AppendArray(reply.mut(), "writeErrors", {error});
  BSON_APPEND_DOUBLE(reply.mut(), "ok", 1.0);
  return ImmediateReply(std::move(reply));
}

bool IsOperatorUpdate(const Doc& u) {
  bson_iter_t it;
  return bson_iter_init(&it, u.get()) && bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
}

// Whether `filter` can match a document because attribute `name` is
// missing (negated forms, null, $exists: false, anything under $nor).
bool TestsAbsence(const bson_t* filter, const std::string& name, bool negated) {
  bson_iter_t it;
  bson_iter_init(&it, filter);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if ((key == "$and" || key == "$or" || key == "$nor") && BSON_ITER_HOLDS_ARRAY(&it)) {
      for (const Doc& branch : ArrayDocuments(it))
        if (TestsAbsence(branch.get(), name, negated || key == "$nor")) return true;
      continue;
    }
    if (FirstComponent(key) != name) continue;
    if (negated || BSON_ITER_HOLDS_NULL(&it)) return true;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
    bson_iter_t op, copy = it;
    bson_iter_recurse(&copy, &op);
    while (bson_iter_next(&op)) {
      std::string_view o = bson_iter_key(&op);
      if (o == "$ne" || o == "$nin" || o == "$not" || BSON_ITER_HOLDS_NULL(&op)) return true;
      if (o == "$exists" && !bson_iter_as_bool(&op)) return true;
      if (o == "$in" && BSON_ITER_HOLDS_ARRAY(&op)) {
        bson_iter_t v, in_copy = op;
        bson_iter_recurse(&in_copy, &v);
        while (bson_iter_next(&v))
          if (BSON_ITER_HOLDS_NULL(&v)) return true;
      }
    }
  }
  return false;
}

// An update that changes attributes, safe under concurrent writers:
//  1. read the _ids the filter matches (one for updateOne);
//  2. push a neutral pair for each changed attribute where it is missing
//     ($set/$min/$max: the value; $inc/$mul: 0), to those _ids that still
//     match the filter;
//  3. the client's write: one statement applies every operator (the
//     attributes through arrayFilters on their pairs) to those _ids that
//     still match the filter, so a conditional update stays atomic;
//  4. pull the $unset attributes from those _ids.
// Steps 2 and 4 are idempotent and carry no txnNumber outside a
// transaction; step 3 carries the client's, so a retry is recognised.
// A write error in step 3 ends the plan; for an updateOne the pairs step 2
// pushed are pulled again (UpdateSteps::TakeBack).
namespace {

Plan PairUpdatePlan(const Command& command_, const AttributeRule& a_, const Doc& statement,
                    const Doc& q, const Doc& fixed_ops, const std::vector<AttributeOp>& ops) {
  const bson_t* s = statement.get();
  const bool multi = FindBool(s, "multi").value_or(false);
  BackendCommand find;
  bson_t* body = find.body.mut();
  AppendString(body, "find", a_.logical.collection);
  AppendDoc(body, "filter", q);
  // The _ids, and which attributes each document has (to take back the
  // pairs pushed for the others if the client's write fails).
  Doc pinned;
  BSON_APPEND_INT32(pinned.mut(), "_id", 1);
  BSON_APPEND_INT32(pinned.mut(), (a_.array_field + "." + a_.key_name).c_str(), 1);
  AppendDoc(body, "projection", pinned);
  BSON_APPEND_INT64(body, "limit", multi ? kMaxPinnedDocuments + 1 : 1);
  BSON_APPEND_INT64(body, "batchSize", multi ? kMaxPinnedDocuments + 1 : 1);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  if (auto collation = ::remold::Find(s, "collation")) AppendValue(body, "collation", *collation);
  if (auto hint = ::remold::Find(s, "hint")) AppendValue(body, "hint", *hint);
  SealCommand(command_, ArgumentTarget::kRead, a_.logical.db, body);

  UpdateSteps steps{a_, command_, statement, q, fixed_ops, ops, multi};
  Plan plan;
  plan.ensure.push_back(EnsureAttributeIndex(a_));
  plan.commands.push_back(std::move(find));
  // Write errors are handled step by step (UpdateSteps::Next).
  plan.then = [steps](std::span<const Doc> replies) { return steps.Next(replies); };
  plan.shape = [steps](std::span<const Doc> replies) { return steps.Shape(replies); };
  return plan;
}

}  // namespace

BackendCommand DocumentsToConvertRead(const Command& command, const AttributeRule& rule, const Doc& statement,
                                      const Doc& filter) {
  const bool multi = FindBool(statement.get(), "multi").value_or(false);
  BackendCommand find;
  bson_t* body = find.body.mut();
  AppendString(body, "find", rule.logical.collection);
  AppendDoc(body, "filter", filter);
  BSON_APPEND_INT64(body, "limit", multi ? kConversionBatch : 1);
  BSON_APPEND_INT64(body, "batchSize", multi ? kConversionBatch : 1);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  // The statement's string comparisons: the same documents match.
  if (auto collation = ::remold::Find(statement.get(), "collation")) AppendValue(body, "collation", *collation);
  SealCommand(command, ArgumentTarget::kRead, rule.logical.db, body);
  return find;
}

// An updateOne reads one flat document; a few rounds cover a guard that
// lost its race to a concurrent write.
int ConversionRounds(bool multi) { return multi ? kMaxConversionRounds : 3; }

std::vector<BackendCommand> ConversionWrites(const Command& command, const AttributeRule& rule,
                                             const Doc& read_reply, MigrationDirection direction) {
  std::vector<Doc> statements;
  for (const Doc& document : PinnedIds(read_reply)) {
    std::optional<Doc> converted = MigratedDocument(rule, document.get(), direction, nullptr);
    if (!converted) continue;  // left as it is: the update will not touch it
    statements.push_back(UpdateSteps::Statement(UnchangedDocument(document), *converted, false));
  }
  if (statements.empty()) return {};
  return {::remold::UpdateCommand(command, ArgumentTarget::kPreparatoryWrite, rule.logical, false,
                                  std::move(statements))};
}

Plan AttributeUpdatePlan(const Command& command, const AttributeRule& rule, const Doc& statement,
                         const Doc& q, const Doc& fixed_ops, const std::vector<AttributeOp>& ops) {
  if (!rule.migrating) return PairUpdatePlan(command, rule, statement, q, fixed_ops, ops);
  // Documents still flat get their pairs first (a change invisible to
  // reads); the update then touches documents in the rule's form only, so
  // it never pushes pairs next to plain attribute fields.
  const Doc flat = *Doc::FromJson(rule.Unconverted());
  Doc not_flat, in_rule_form, flat_matches;
  AppendArray(not_flat.mut(), "$nor", {flat});
  AppendArray(in_rule_form.mut(), "$and", {q, not_flat});
  Plan update = PairUpdatePlan(command, rule, statement, in_rule_form, fixed_ops, ops);
  const bool multi = FindBool(statement.get(), "multi").value_or(false);
  AppendArray(flat_matches.mut(), "$and", {FindDocument(statement.get(), "q").value_or(Doc()), flat});
  return AfterPrelude(DocumentsToConvertRead(command, rule, statement, flat_matches),
                      [command, rule](const Doc& reply) {
                        return ConversionWrites(command, rule, reply, MigrationDirection::kToRule);
                      },
                      std::move(update), ConversionRounds(multi));
}


}  // namespace remold
