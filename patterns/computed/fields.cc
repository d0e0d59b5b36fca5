#include "patterns/computed/fields.h"

#include <algorithm>

#include "patterns/expression/evaluate.h"
#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// Unset by an update that must change nothing (no document holds it).
constexpr const char* kNoOpField = "__remold_noop__";

std::string_view FirstComponent(std::string_view path) { return path.substr(0, path.find('.')); }

const ComputedField* FieldNamed(const ComputedRule& rule, std::string_view name) {
  for (const auto& f : rule.fields)
    if (f.field == name) return &f;
  return nullptr;
}

Refusal Immutable(const std::string& field, const ComputedField& computed) {
  std::string inputs;
  for (const auto& i : computed.inputs) inputs += (inputs.empty() ? "" : ", ") + i;
  return {error_codes::kImmutableField,
          "'" + field + "' is computed by remold from " + (inputs.empty() ? "constants" : inputs) +
              "; it cannot be written (the rule has on_client_write: reject)"};
}

}  // namespace

std::vector<std::string> ComputedInputs(const ComputedRule& rule) {
  std::vector<std::string> inputs;
  for (const auto& f : rule.fields)
    for (const auto& i : f.inputs)
      if (std::find(inputs.begin(), inputs.end(), i) == inputs.end()) inputs.push_back(i);
  return inputs;
}

std::optional<Refusal> WithComputedFields(const ComputedRule& rule, const bson_t* doc,
                                                 Doc& out) {
  Doc computed;
  for (const ComputedField& field : rule.fields) {
    auto value = Evaluate(field.expression, doc);
    if (auto* error = std::get_if<EvaluationError>(&value))
      return Refusal{error_codes::kTypeMismatch, "cannot compute '" + field.field + "': " + error->message};
    const ComputedValue& v = std::get<ComputedValue>(value);
    std::optional<bson_iter_t> given = Find(doc, field.field);
    if (given && rule.on_client_write == ComputedRule::ClientWrite::kReject && !HoldsValue(&*given, v))
      return Immutable(field.field, field);
    AppendComputedValue(computed.mut(), field.field, v);
  }
  // The client's fields in their order, computed ones in place or appended.
  bson_iter_t it;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (FieldNamed(rule, key)) AppendValue(out.mut(), key, *Find(computed.get(), key));
    else AppendValue(out.mut(), key, it);
  }
  for (const ComputedField& field : rule.fields)
    if (!Find(doc, field.field)) AppendValue(out.mut(), field.field, *Find(computed.get(), field.field));
  return std::nullopt;
}

std::optional<Refusal> PrepareUpdate(const ComputedRule& rule, const ClientUpdate& update,
                                            ClientUpdate& out) {
  out.pipeline = update.pipeline;
  if (rule.fields.empty() || update.pipeline) {
    out.u = update.u;
    return std::nullopt;
  }
  if (update.is_replacement()) return WithComputedFields(rule, update.u.get(), out.u);
  bson_iter_t op;
  bson_iter_init(&op, update.u.get());
  std::optional<Refusal> error;
  while (bson_iter_next(&op)) {
    const std::string_view name = bson_iter_key(&op);
    Doc kept;
    ForEachChild(op, [&](std::string_view path, const bson_iter_t& arg) {
      std::string_view target = FirstComponent(path);
      if (name == "$rename" && BSON_ITER_HOLDS_UTF8(&arg)) {
        std::string_view to = FirstComponent(bson_iter_utf8(&arg, nullptr));
        if (FieldNamed(rule, to)) target = to;
      }
      if (const ComputedField* field = FieldNamed(rule, target)) {
        if (rule.on_client_write == ComputedRule::ClientWrite::kReject && !error)
          error = Immutable(std::string(target), *field);
        return;  // overwritten: remold sets it after the write
      }
      AppendValue(kept.mut(), path, arg);
    });
    if (!kept.empty()) AppendDoc(out.u.mut(), name, kept);
  }
  if (error) return error;
  if (out.u.empty()) {
    // Only computed fields were written, and remold overwrites them: the
    // statement still matches (and may upsert) but changes nothing.
    Doc noop;
    AppendString(noop.mut(), kNoOpField, "");
    AppendDoc(out.u.mut(), "$unset", noop);
  }
  return std::nullopt;
}

void ScheduleComputedRepair(CommandQueue& queue, const ComputedRule& rule, const Command& client,
                            std::vector<Doc> ids, std::vector<std::string>* warnings,
                            std::function<void(const Doc& error)> abort) {
  if (ids.empty() || rule.fields.empty()) return;
  const std::vector<std::string> inputs = ComputedInputs(rule);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", rule.logical.collection);
  Doc filter, in, id_in, projection;
  bson_t array;
  BSON_APPEND_ARRAY_BEGIN(in.mut(), "$in", &array);
  for (size_t i = 0; i < ids.size(); ++i) AppendValue(&array, std::to_string(i), *Find(ids[i].get(), "v"));
  bson_append_array_end(in.mut(), &array);
  AppendDoc(filter.mut(), "_id", in);
  AppendDoc(body, "filter", filter);
  BSON_APPEND_INT32(projection.mut(), "_id", 1);
  for (const auto& f : inputs) BSON_APPEND_INT32(projection.mut(), f.c_str(), 1);
  for (const auto& f : rule.fields) BSON_APPEND_INT32(projection.mut(), f.field.c_str(), 1);
  AppendDoc(body, "projection", projection);
  BSON_APPEND_INT32(body, "batchSize", static_cast<int32_t>(ids.size()) + 1);
  BSON_APPEND_BOOL(body, "singleBatch", true);
  SealCommand(client, ArgumentTarget::kRead, rule.logical.db, body);
  read.may_fail = true;
  queue.Push(std::move(read), [&queue, &rule, &client, inputs, warnings, abort](const Doc& reply) {
    if (!IsOkReply(reply)) {
      if (InTransaction(client)) abort(reply);
      else warnings->push_back("reading " + rule.logical.full() + " to set computed fields failed: " +
                               FindString(reply.get(), "errmsg").value_or("no errmsg") +
                               "; run `remold reconcile`");
      return;
    }
    std::vector<Doc> statements;
    std::vector<Doc> docs = FirstBatch(reply);
    for (const Doc& doc : docs) {
      Doc set, unset;
      for (const ComputedField& field : rule.fields) {
        auto value = Evaluate(field.expression, doc.get());
        if (auto* error = std::get_if<EvaluationError>(&value)) {
          // The update already happened (an insert would have been
          // refused): no value rather than a stale one, and a warning.
          warnings->push_back("cannot compute '" + field.field + "' of a document of " +
                              rule.logical.full() + " after an update: " + error->message +
                              "; the field is removed");
          if (Find(doc.get(), field.field)) AppendString(unset.mut(), field.field, "");
          continue;
        }
        std::optional<bson_iter_t> stored = Find(doc.get(), field.field);
        const ComputedValue& v = std::get<ComputedValue>(value);
        if (!stored || !HoldsValue(&*stored, v)) AppendComputedValue(set.mut(), field.field, v);
      }
      if (set.empty() && unset.empty()) continue;
      Doc q, u, statement;
      AppendValue(q.mut(), "_id", *Find(doc.get(), "_id"));
      for (const auto& f : inputs) {
        if (auto v = Find(doc.get(), f)) {
          Doc eq;
          AppendValue(eq.mut(), "$eq", *v);
          AppendDoc(q.mut(), f, eq);
        } else {
          BSON_APPEND_NULL(q.mut(), f.c_str());
        }
      }
      if (!set.empty()) AppendDoc(u.mut(), "$set", set);
      if (!unset.empty()) AppendDoc(u.mut(), "$unset", unset);
      AppendDoc(statement.mut(), "q", q);
      AppendDoc(statement.mut(), "u", u);
      BSON_APPEND_BOOL(statement.mut(), "multi", false);
      statements.push_back(std::move(statement));
    }
    if (statements.empty()) return;
    BackendCommand update = UpdateCommand(client, ArgumentTarget::kPreparatoryWrite, rule.logical,
                                          false, InLockOrder(std::move(statements)));  // one document each
    update.may_fail = true;
    queue.Push(std::move(update), [warnings, &rule, &client, abort](const Doc& reply) {
      if (IsOkReply(reply) && !Find(reply.get(), "writeErrors")) return;
      if (InTransaction(client)) {
        abort(IsOkReply(reply) ? ErrorReply(8, "", "remold: setting computed fields of " +
                                                       rule.logical.full() + " failed")
                               : reply);
        return;
      }
      warnings->push_back("setting computed fields of " + rule.logical.full() + " failed: " +
                          reply.ToRelaxedJson() + "; run `remold reconcile`");
    });
  });
}

}  // namespace remold
