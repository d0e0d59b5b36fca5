#include "patterns/computed/reconcile_expected.h"

#include <algorithm>
#include <variant>

#include "patterns/computed/accumulator.h"
#include "patterns/expression/evaluate.h"

namespace remold {
namespace {

using Op = MaintainedField::Op;

void AppendText(bson_t* out, std::string_view key, std::string_view text) { AppendString(out, key, text); }

void AppendInt(bson_t* out, std::string_view key, int32_t value) {
  bson_append_int32(out, key.data(), static_cast<int>(key.size()), value);
}

Doc Pipeline(const std::vector<Doc>& stages) {
  Doc pipeline;
  AppendArray(pipeline.mut(), "pipeline", stages);
  return pipeline;
}

Doc GroupBody(const ComputedAggregate& aggregate) {
  Doc group;
  AppendText(group.mut(), "_id", "$" + aggregate.link_from);
  return group;
}

bool IsAbsent(const std::optional<bson_iter_t>& value) {
  return !value || bson_iter_type(&*value) == BSON_TYPE_NULL;
}

std::vector<Value> Latest(const MaintainedField& field, const bson_t* values, const LatestChoices* ties) {
  // Without a greatest `by` no source is the latest.
  if (IsAbsent(Find(values, field.by_field))) return {Value()};
  if (ties) {
    auto it = ties->find(field.field);
    if (it != ties->end() && !it->second.empty()) return it->second;
  }
  std::optional<bson_iter_t> first = Find(values, field.field);
  return {first ? Value::Of(*first) : Value()};
}

Expectation Maintained(const MaintainedField& field, const LinkSources* sources, const LatestChoices* ties) {
  Expectation expectation;
  expectation.field = field.field;
  std::optional<bson_iter_t> value;
  if (sources) value = Find(sources->values.get(), field.field);
  switch (field.op) {
    case Op::kCount:
    case Op::kSum:
      expectation.accepted = {value ? Value::Of(*value) : Value::Int32(0)};
      expectation.missing_ok = sources == nullptr;
      break;
    case Op::kLatest:
      expectation.accepted = sources ? Latest(field, sources->values.get(), ties) : std::vector<Value>{Value()};
      break;
    case Op::kMin:
    case Op::kMax:
      expectation.accepted = {value ? Value::Of(*value) : Value()};
      break;
  }
  return expectation;
}

// The accepted value `document` holds, or the first: what derived fields see.
const Value& Chosen(const Expectation& expectation, const bson_t* document) {
  std::optional<bson_iter_t> stored = Find(document, expectation.field);
  for (const Value& value : expectation.accepted) {
    if (Holds(stored ? &*stored : nullptr, value)) return value;
  }
  return expectation.accepted.front();
}

Expectation Evaluated(const ComputedField& field, const bson_t* document) {
  Expectation expectation;
  expectation.field = field.field;
  std::variant<ComputedValue, EvaluationError> result = Evaluate(field.expression, document);
  if (const auto* error = std::get_if<EvaluationError>(&result)) expectation.error = error->message;
  else expectation.accepted = {Value::Of(std::get<ComputedValue>(result))};
  return expectation;
}

}  // namespace

Doc LinkFilter(const std::string& field, const std::vector<Value>* links) {
  Doc condition;
  if (links) {
    bson_t array;
    bson_append_array_begin(condition.mut(), "$in", -1, &array);
    char buffer[16];
    for (size_t i = 0; i < links->size(); ++i) {
      const char* key = nullptr;
      size_t length = bson_uint32_to_string(static_cast<uint32_t>(i), &key, buffer, sizeof buffer);
      (*links)[i].AppendTo(&array, std::string_view(key, length));
    }
    bson_append_array_end(condition.mut(), &array);
  } else {
    bson_append_bool(condition.mut(), "$exists", -1, true);
    bson_append_null(condition.mut(), "$ne", -1);
  }
  Doc filter;
  AppendDoc(filter.mut(), field, condition);
  return filter;
}

Doc GroupPipeline(const ComputedAggregate& aggregate, const std::vector<Value>* links) {
  Doc group = GroupBody(aggregate);
  for (const MaintainedField& field : aggregate.fields) {
    if (field.op != Op::kLatest) AppendDoc(group.mut(), field.field, GroupAccumulator(field));
  }
  return Pipeline({Stage("$match", LinkFilter(aggregate.link_from, links)), Stage("$group", group)});
}

std::vector<std::string> LatestOrders(const ComputedAggregate& aggregate) {
  std::vector<std::string> orders;
  for (const MaintainedField& field : aggregate.fields) {
    if (field.op == Op::kLatest && std::find(orders.begin(), orders.end(), field.by) == orders.end())
      orders.push_back(field.by);
  }
  return orders;
}

Doc LatestPipeline(const ComputedAggregate& aggregate, const std::string& by, const std::vector<Value>* links) {
  Doc sort;
  AppendInt(sort.mut(), by, -1);
  Doc group = GroupBody(aggregate);
  for (const MaintainedField& field : aggregate.fields) {
    if (field.op == Op::kLatest && field.by == by) AppendDoc(group.mut(), field.field, GroupAccumulator(field));
  }
  return Pipeline({Stage("$match", LinkFilter(aggregate.link_from, links)), Stage("$sort", sort), Stage("$group", group)});
}

void AppendGroupValues(Doc& values, const bson_t* group_result) {
  bson_iter_t iter;
  if (!bson_iter_init(&iter, group_result)) return;
  while (bson_iter_next(&iter)) {
    if (std::string_view(bson_iter_key(&iter)) != "_id") AppendValue(values.mut(), bson_iter_key(&iter), iter);
  }
}

std::vector<Expectation> AggregateExpectations(const ComputedAggregate& aggregate, const LinkSources* sources,
                                               const LatestChoices* ties, const bson_t* target) {
  std::vector<Expectation> expectations;
  Doc basis;  // the expected maintained values: what derived fields are computed from
  for (const MaintainedField& field : aggregate.fields) {
    Expectation expectation = Maintained(field, sources, ties);
    const Value& chosen = Chosen(expectation, target);
    if (!chosen.is_null()) chosen.AppendTo(basis.mut(), field.field);
    expectations.push_back(std::move(expectation));
  }
  for (const ComputedField& derived : aggregate.derived) {
    Expectation expectation = Evaluated(derived, basis.get());
    // A target nothing ever linked to was never given its derived fields.
    expectation.missing_ok = sources == nullptr;
    expectations.push_back(std::move(expectation));
  }
  return expectations;
}

std::vector<Expectation> FieldExpectations(const std::vector<ComputedField>& fields, const bson_t* document) {
  std::vector<Expectation> expectations;
  for (const ComputedField& field : fields) expectations.push_back(Evaluated(field, document));
  return expectations;
}

void CollectLatestChoice(const ComputedAggregate& aggregate, const bson_t* values, const bson_t* source,
                         LatestChoices& choices) {
  for (const MaintainedField& field : aggregate.fields) {
    if (field.op != Op::kLatest) continue;
    std::optional<bson_iter_t> greatest = Find(values, field.by_field);
    std::optional<bson_iter_t> by = Find(source, field.by);
    if (IsAbsent(greatest) || !by || !Holds(&*by, Value::Of(*greatest))) continue;
    std::optional<bson_iter_t> of = Find(source, field.of);
    Value choice = of ? Value::Of(*of) : Value();
    std::vector<Value>& list = choices[field.field];
    if (std::find(list.begin(), list.end(), choice) == list.end()) list.push_back(std::move(choice));
  }
}

}  // namespace remold
