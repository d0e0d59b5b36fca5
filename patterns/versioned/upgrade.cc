#include "patterns/versioned/upgrade.h"

#include <bson/bson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "patterns/expression/evaluate.h"

namespace remold {
namespace {

constexpr double kExactIntegers = 9007199254740992.0;  // 2^53

// One top-level field: its name, and its value as the only element of
// `holder`.
struct Entry {
  std::string key;
  Doc holder;

  bson_iter_t value() const {
    bson_iter_t it;
    bson_iter_init(&it, holder.get());
    bson_iter_next(&it);
    return it;
  }
};

Entry MakeEntry(std::string_view key, const bson_iter_t& value) {
  Entry e{std::string(key), Doc()};
  AppendValue(e.holder.mut(), "v", value);
  return e;
}

std::vector<Entry> Entries(const bson_t* document) {
  std::vector<Entry> out;
  bson_iter_t it;
  if (!bson_iter_init(&it, document)) return out;
  while (bson_iter_next(&it)) out.push_back(MakeEntry(bson_iter_key(&it), it));
  return out;
}

Doc Build(const std::vector<Entry>& entries) {
  Doc out;
  for (const Entry& e : entries) AppendValue(out.mut(), e.key, e.value());
  return out;
}

// The value of one field, as an entry (how a new value is placed).
template <typename AppendFn>
Entry NewEntry(const std::string& key, AppendFn&& append) {
  Entry e{key, Doc()};
  append(e.holder.mut());
  return e;
}

bool Named(const std::vector<std::string>& names, std::string_view key) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

std::vector<Entry>::iterator FindEntry(std::vector<Entry>& entries, std::string_view key) {
  return std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
}

// `key` set to `entry`'s value: in its place, or added last.
void Set(std::vector<Entry>& entries, Entry entry) {
  auto at = FindEntry(entries, entry.key);
  if (at != entries.end()) *at = std::move(entry);
  else entries.push_back(std::move(entry));
}

void AppendLiteral(bson_t* out, const Expression::Literal& literal) {
  struct {
    bson_t* out;
    void operator()(std::monostate) const { BSON_APPEND_NULL(out, "v"); }
    void operator()(bool b) const { BSON_APPEND_BOOL(out, "v", b); }
    void operator()(int64_t i) const {
      if (i >= INT32_MIN && i <= INT32_MAX) BSON_APPEND_INT32(out, "v", static_cast<int32_t>(i));
      else BSON_APPEND_INT64(out, "v", i);
    }
    void operator()(double d) const { BSON_APPEND_DOUBLE(out, "v", d); }
    void operator()(const std::string& s) const { AppendString(out, "v", s); }
  } append{out};
  std::visit(append, literal);
}

// A number's value as a double (decimal128 by its nearest double, as the
// server converts it), or nullopt for other types.
std::optional<double> NumberValue(const bson_iter_t& it) {
  switch (bson_iter_type(&it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(&it);
    case BSON_TYPE_INT64: return static_cast<double>(bson_iter_int64(&it));
    case BSON_TYPE_DOUBLE: return bson_iter_double(&it);
    case BSON_TYPE_DECIMAL128: {
      bson_decimal128_t dec;
      bson_iter_decimal128(&it, &dec);
      char text[BSON_DECIMAL128_STRING];
      bson_decimal128_to_string(&dec, text);
      return std::strtod(text, nullptr);
    }
    default: return std::nullopt;
  }
}

// An integral number below 2^53 in magnitude, exactly.
std::optional<int64_t> IntegralValue(const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_INT32(&it)) return bson_iter_int32(&it);
  if (BSON_ITER_HOLDS_INT64(&it)) {
    int64_t v = bson_iter_int64(&it);
    if (v > -static_cast<int64_t>(kExactIntegers) && v < static_cast<int64_t>(kExactIntegers)) return v;
    return std::nullopt;
  }
  std::optional<double> d = NumberValue(it);
  if (!d || !std::isfinite(*d) || std::trunc(*d) != *d || std::fabs(*d) >= kExactIntegers) return std::nullopt;
  return static_cast<int64_t>(*d);
}

// The converted value of `it`, or nullopt to leave it as it is.
std::optional<Entry> Converted(const std::string& key, const bson_iter_t& it, UpgradeStep::Type type) {
  using Type = UpgradeStep::Type;
  if (type == Type::kDouble) {
    std::optional<double> d = NumberValue(it);
    if (!d) return std::nullopt;
    return NewEntry(key, [&](bson_t* out) { BSON_APPEND_DOUBLE(out, "v", *d); });
  }
  std::optional<int64_t> i = IntegralValue(it);
  if (!i) return std::nullopt;
  switch (type) {
    case Type::kString: return NewEntry(key, [&](bson_t* out) { AppendString(out, "v", std::to_string(*i)); });
    case Type::kLong: return NewEntry(key, [&](bson_t* out) { BSON_APPEND_INT64(out, "v", *i); });
    case Type::kInt:
      if (*i < INT32_MIN || *i > INT32_MAX) return std::nullopt;
      return NewEntry(key, [&](bson_t* out) { BSON_APPEND_INT32(out, "v", static_cast<int32_t>(*i)); });
    case Type::kDouble: break;
  }
  return std::nullopt;
}

// The fields an expression reads, each a string or null/missing: what an
// upgrade's concat and part take (a read checks the same).
bool ReadsOnlyStrings(const Expression& e, const bson_t* document) {
  if (e.kind == Expression::Kind::kField) {
    auto value = Evaluate(e, document);
    if (std::holds_alternative<EvaluationError>(value)) return false;
    const ComputedValue& v = std::get<ComputedValue>(value);
    return std::holds_alternative<std::monostate>(v) || std::holds_alternative<std::string>(v);
  }
  return std::all_of(e.operands.begin(), e.operands.end(),
                     [&](const Expression& operand) { return ReadsOnlyStrings(operand, document); });
}

// Applies one step; false (with why) when it cannot apply.
bool Apply(const UpgradeStep& step, std::vector<Entry>& entries, std::string& why) {
  using Kind = UpgradeStep::Kind;
  switch (step.kind) {
    case Kind::kRename: {
      if (FindEntry(entries, step.field) == entries.end()) return true;
      std::erase_if(entries, [&](const Entry& e) { return e.key == step.to; });
      FindEntry(entries, step.field)->key = step.to;
      return true;
    }
    case Kind::kDefault:
      if (FindEntry(entries, step.field) == entries.end())
        entries.push_back(NewEntry(step.field, [&](bson_t* out) { AppendLiteral(out, step.value); }));
      return true;
    case Kind::kCompute: {
      const Doc document = Build(entries);
      if (!ReadsOnlyStrings(step.expression, document.get())) {
        why = "computing '" + step.field + "' reads a value that is not a string";
        return false;
      }
      auto value = Evaluate(step.expression, document.get());
      if (auto* error = std::get_if<EvaluationError>(&value)) {
        why = "computing '" + step.field + "': " + error->message;
        return false;
      }
      Set(entries, NewEntry(step.field, [&](bson_t* out) {
            AppendComputedValue(out, "v", std::get<ComputedValue>(value));
          }));
      return true;
    }
    case Kind::kConvert: {
      auto at = FindEntry(entries, step.field);
      if (at == entries.end()) return true;
      if (std::optional<Entry> converted = Converted(step.field, at->value(), step.type)) *at = std::move(*converted);
      return true;
    }
    case Kind::kMoveInto: {
      std::vector<Entry> moved;
      for (const Entry& e : entries)
        if (Named(step.fields, e.key)) moved.push_back(e);
      if (moved.empty()) return true;
      auto sub = FindEntry(entries, step.field);
      std::vector<Entry> inner;
      if (sub != entries.end()) {
        bson_iter_t value = sub->value();
        if (!BSON_ITER_HOLDS_DOCUMENT(&value)) {
          why = "'" + step.field + "' is not a document to move fields into";
          return false;
        }
        inner = Entries(FindDocument(sub->holder.get(), "v")->get());
      }
      std::erase_if(inner, [&](const Entry& e) {
        return std::any_of(moved.begin(), moved.end(), [&](const Entry& m) { return m.key == e.key; });
      });
      for (Entry& e : moved) inner.push_back(std::move(e));
      std::erase_if(entries, [&](const Entry& e) { return Named(step.fields, e.key); });
      const Doc built = Build(inner);
      Set(entries, NewEntry(step.field, [&](bson_t* out) { AppendDoc(out, "v", built); }));
      return true;
    }
    case Kind::kMoveOutOf: {
      auto sub = FindEntry(entries, step.field);
      if (sub == entries.end()) return true;
      bson_iter_t value = sub->value();
      if (!BSON_ITER_HOLDS_DOCUMENT(&value)) {
        why = "'" + step.field + "' is not a document to move fields out of";
        return false;
      }
      std::vector<Entry> moved, remaining;
      for (Entry& e : Entries(FindDocument(sub->holder.get(), "v")->get()))
        (Named(step.fields, e.key) ? moved : remaining).push_back(std::move(e));
      if (moved.empty()) return true;
      std::vector<Entry> out;
      for (Entry& e : entries) {
        if (e.key == step.field) {
          for (Entry& m : moved) out.push_back(std::move(m));
          if (!remaining.empty()) {
            const Doc built = Build(remaining);
            out.push_back(NewEntry(step.field, [&](bson_t* o) { AppendDoc(o, "v", built); }));
          }
          continue;
        }
        const bool replaced = std::any_of(moved.begin(), moved.end(), [&](const Entry& m) { return m.key == e.key; });
        if (!replaced) out.push_back(std::move(e));
      }
      entries = std::move(out);
      return true;
    }
    case Kind::kRemove:
      std::erase_if(entries, [&](const Entry& e) { return Named(step.fields, e.key); });
      return true;
  }
  return true;
}

}  // namespace

std::optional<int32_t> VersionOf(const VersionedRule& rule, const bson_t* document) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, document, rule.field.c_str()) || BSON_ITER_HOLDS_NULL(&it)) return rule.first();
  std::optional<double> number = NumberValue(it);
  if (!number) return std::nullopt;
  for (const DocumentVersion& version : rule.versions)
    if (version.number == *number) return version.number;
  return std::nullopt;
}

UpgradedDocument Upgrade(const VersionedRule& rule, const bson_t* document) {
  UpgradedDocument out;
  out.document = Doc::FromBson(document);
  out.from = VersionOf(rule, document);
  out.reached = out.from;
  if (!out.from) return out;
  std::vector<Entry> entries = Entries(document);
  for (size_t i = 1; i < rule.versions.size(); ++i) {
    if (rule.versions[i - 1].number != *out.reached) continue;
    std::vector<Entry> next = entries;
    bool applied = true;
    for (const UpgradeStep& step : rule.versions[i].upgrade) {
      if (!(applied = Apply(step, next, out.why))) break;
    }
    if (!applied) break;
    const int32_t number = rule.versions[i].number;
    Set(next, NewEntry(rule.field, [&](bson_t* o) { BSON_APPEND_INT32(o, "v", number); }));
    entries = std::move(next);
    out.reached = number;
  }
  if (out.changed()) out.document = Build(entries);
  return out;
}

}  // namespace remold
