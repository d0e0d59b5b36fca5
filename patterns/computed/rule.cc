// The `computed:` section of a rule file -> ComputedRule.
//
//   computed:
//     aggregates:                     # maintained fields of other documents
//       - target: posts               # "collection" (same database) or "db.collection"
//         link: {from: postId, to: _id}
//         create_target: false
//         fields:
//           commentCount: count
//           lastCommentAt: {max: createdAt}
//           lastCommentBy: {latest: author, by: createdAt}
//         derived:
//           avgStars: {divide: [starSum, commentCount]}
//     fields:                         # same-document computed fields
//       total: {sum: {each: items, of: {product: [price, qty]}}}
//     on_client_write: reject         # or overwrite
//
// Mistakes are reported through the FileContext (rules/file_context.h),
// every one of them.
#include "patterns/computed/rule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "rules/file_context.h"

namespace remold {
namespace {

std::vector<ComputedField> ParseComputedFields(const FileContext& ctx, const YAML::Node& map,
                                               const std::string& where) {
  if (!map.IsMap() || map.size() == 0)
    ctx.Fail(map, "'" + where + "' must map field names to expressions");
  std::vector<ComputedField> out;
  std::set<std::string> names;
  bool all_ok = true;
  for (const auto& entry : map) {
    all_ok &= ctx.Step([&] {
      ComputedField field;
      field.field = ctx.KeyName(entry.first, "computed field");
      if (!ctx.CheckFieldName(entry.first, field.field, "computed field")) return;
      if (field.field == "_id") ctx.Fail(entry.first, "'_id' cannot be a computed field");
      if (!names.insert(field.field).second)
        ctx.Fail(entry.first, "computed field '" + field.field + "' is defined twice");
      std::set<std::string> inputs;
      field.expression = ParseExpression(ctx, entry.second, inputs);
      field.inputs.assign(inputs.begin(), inputs.end());
      out.push_back(std::move(field));
    });
  }
  // A field that could not be read may be what another one reads.
  if (!all_ok) return out;
  for (const auto& field : out) {
    for (const auto& other : out) {
      if (std::count(other.inputs.begin(), other.inputs.end(), field.field))
        ctx.Report(map, "computed field '" + other.field + "' reads computed field '" + field.field +
                          "', expected expressions over stored fields only");
    }
  }
  return out;
}

MaintainedField ParseMaintained(const FileContext& ctx, const std::string& name, const YAML::Node& spec) {
  MaintainedField field;
  field.field = name;
  if (TypeOf(spec) == YamlType::kString && spec.Scalar() == "count") {
    field.op = MaintainedField::Op::kCount;
    return field;
  }
  static const std::map<std::string, MaintainedField::Op> kOps = {
      {"count", MaintainedField::Op::kCount}, {"sum", MaintainedField::Op::kSum},
      {"min", MaintainedField::Op::kMin},     {"max", MaintainedField::Op::kMax},
      {"latest", MaintainedField::Op::kLatest}};
  const std::string expected =
      "expected count, {sum: F}, {min: F}, {max: F} or {latest: F, by: G}";
  if (!spec.IsMap() || spec.size() == 0)
    ctx.Fail(spec, "maintained field '" + name + "' is " + Found(spec) + ", " + expected);
  std::string op = spec["latest"] ? "latest" : spec.begin()->first.Scalar();
  auto it = kOps.find(op);
  if (it == kOps.end()) ctx.Fail(spec, "maintained field '" + name + "': unknown '" + op + "', " + expected);
  field.op = it->second;
  if (field.op == MaintainedField::Op::kCount) {
    ctx.CheckKeys(spec, "'" + name + "'", {"count"});
    if (TypeOf(spec["count"]) != YamlType::kBool || !ParseBool(ctx, spec, "count", false))
      ctx.Fail(spec, "maintained field '" + name + "': write 'count' or {count: true}");
    return field;
  }
  if (field.op == MaintainedField::Op::kLatest) {
    ctx.CheckKeys(spec, "'" + name + "'", {"latest", "by"});
    field.by = ctx.String(spec, "by", "'" + name + "' (the field that orders 'latest')", "a field name");
    ctx.CheckFieldName(spec["by"], field.by, "source field");
  } else {
    ctx.CheckKeys(spec, "'" + name + "'", {op});
  }
  field.of = ctx.String(spec, op, "'" + name + "'", "a field name");
  ctx.CheckFieldName(spec[op], field.of, "source field");
  return field;
}

// Each key is read in a Step of its own, so every mistake is reported; a
// check that combines keys runs only when those keys were read.
ComputedAggregate ParseAggregate(const FileContext& ctx, const YAML::Node& a, const Namespace& logical) {
  if (!a.IsMap())
    ctx.Fail(a, "an aggregate is " + Found(a) + ", expected a mapping with target, link and fields");
  ctx.CheckKeys(a, "an aggregate", {"target", "link", "create_target", "fields", "derived"});
  ComputedAggregate aggregate;
  ctx.Step([&] {
    std::string target = ctx.String(a, "target", "an aggregate", "a collection name");
    if (target.empty() || target.find('$') != std::string::npos)
      ctx.Fail(a["target"], "target '" + target + "' must be 'collection' or 'database.collection'");
    aggregate.target = target.find('.') == std::string::npos
                           ? Namespace{logical.db, target}
                           : ParseNamespace(ctx, a["target"], target);
    if (aggregate.target == logical)
      ctx.Fail(a["target"], "the target is the rule's own collection; use 'fields' for same-document values");
  });

  bool link_ok = ctx.Step([&] {
    YAML::Node link = a["link"];
    if (!link) ctx.Fail(a, "missing 'link' in an aggregate, expected {from: <source field>, to: <target field>}");
    if (link.IsMap()) {
      ctx.CheckKeys(link, "'link'", {"from", "to"});
      ctx.Step([&] {
        aggregate.link_from = ctx.String(link, "from", "'link'", "a field name");
        ctx.CheckFieldName(link["from"], aggregate.link_from, "link field");
      });
      ctx.Step([&] {
        aggregate.link_to = ctx.OptionalString(link, "to", "_id", "a field name");
        if (link["to"]) ctx.CheckFieldName(link["to"], aggregate.link_to, "link field");
      });
    } else {
      aggregate.link_from = ctx.StringValue(
          link, "'link'", "a source field name or {from: <source field>, to: <target field>}");
      ctx.CheckFieldName(link, aggregate.link_from, "link field");
    }
  });
  ctx.Step([&] { aggregate.create_target = ParseBool(ctx, a, "create_target", false); });

  YAML::Node fields = a["fields"];
  std::set<std::string> names;
  bool fields_ok = ctx.Step([&] {
    if (!fields || !fields.IsMap() || fields.size() == 0)
      ctx.Fail(fields ? fields : a, "'fields' must map target field names to count, sum, min, max or latest");
    for (const auto& entry : fields) {
      ctx.Step([&] {
        std::string name = ctx.KeyName(entry.first, "maintained field");
        if (!ctx.CheckFieldName(entry.first, name, "maintained field")) return;
        if (name == "_id" || (link_ok && name == aggregate.link_to))
          ctx.Fail(entry.first, "'" + name + "' identifies the target; it cannot be maintained");
        if (!names.insert(name).second) ctx.Fail(entry.first, "field '" + name + "' is maintained twice");
        aggregate.fields.push_back(ParseMaintained(ctx, name, entry.second));
      });
    }
  });
  // 'latest' needs the max of its order beside it; unknowable if a field is unreadable.
  if (fields_ok) {
    for (auto& field : aggregate.fields) {
      if (field.op != MaintainedField::Op::kLatest) continue;
      for (const auto& other : aggregate.fields) {
        if (other.op == MaintainedField::Op::kMax && other.of == field.by) field.by_field = other.field;
      }
      if (field.by_field.empty())
        ctx.Report(fields[field.field], "'" + field.field + "' is the latest by '" + field.by +
                                            "': declare a field {max: " + field.by + "} beside it");
    }
  }
  if (a["derived"]) {
    ctx.Step([&] {
      aggregate.derived = ParseComputedFields(ctx, a["derived"], "derived");
      for (const auto& d : aggregate.derived) {
        if (names.count(d.field)) ctx.Report(a["derived"], "field '" + d.field + "' is both maintained and derived");
        if (link_ok && d.field == aggregate.link_to)
          ctx.Report(a["derived"], "'" + d.field + "' identifies the target; it cannot be derived");
        for (const auto& input : d.inputs) {
          bool derived = std::any_of(aggregate.derived.begin(), aggregate.derived.end(),
                                     [&](const ComputedField& o) { return o.field == input; });
          if (fields_ok && !names.count(input) && !derived)  // derived: reported as such
            ctx.Report(a["derived"], "derived field '" + d.field + "' reads '" + input +
                                         "', expected only maintained fields of this aggregate");
        }
      }
    });
  }
  std::vector<std::string>& inputs = aggregate.inputs;
  inputs.push_back(aggregate.link_from);
  auto add = [&](const std::string& f) {
    if (!f.empty() && std::find(inputs.begin(), inputs.end(), f) == inputs.end()) inputs.push_back(f);
  };
  for (const auto& field : aggregate.fields) {
    add(field.of);
    add(field.by);
  }
  return aggregate;
}

}  // namespace

ComputedRule ComputedRule::Parse(const FileContext& ctx, const YAML::Node& c,
                                 const Namespace& logical) {
  ctx.CheckKeys(c, "'computed'", {"aggregates", "fields", "on_client_write", "migrating"});
  ComputedRule rule;
  rule.logical = logical;
  std::vector<YAML::Node> aggregate_nodes;  // of rule.aggregates, index for index
  if (YAML::Node list = c["aggregates"]) {
    ctx.Step([&] {
      if (!list.IsSequence() || list.size() == 0)
        ctx.Fail(list, "'aggregates' is " + Found(list) + ", expected a non-empty list of {target, link, fields}");
      for (const auto& a : list) {
        ComputedAggregate aggregate;
        if (ctx.Step([&] { aggregate = ParseAggregate(ctx, a, logical); })) {
          rule.aggregates.push_back(std::move(aggregate));
          aggregate_nodes.push_back(a);
        }
      }
    });
    for (size_t i = 0; i < rule.aggregates.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        const auto& x = rule.aggregates[i];
        const auto& y = rule.aggregates[j];
        if (x.target != y.target) continue;
        // Maintained and derived fields alike: two aggregates would overwrite each other.
        auto written = [](const ComputedAggregate& g) {
          std::set<std::string> out;
          for (const auto& f : g.fields) out.insert(f.field);
          for (const auto& d : g.derived) out.insert(d.field);
          return out;
        };
        std::set<std::string> theirs = written(y);
        for (const auto& f : written(x)) {
          if (theirs.count(f))
            ctx.Report(aggregate_nodes[i], "field '" + f + "' of " + x.target.full() +
                                               " is maintained by two aggregates");
        }
      }
    }
  }
  bool fields_ok = true;
  if (c["fields"])
    fields_ok = ctx.Step([&] { rule.fields = ParseComputedFields(ctx, c["fields"], "fields"); });
  if (fields_ok) {
    for (size_t i = 0; i < rule.aggregates.size(); ++i) {
      for (const auto& input : rule.aggregates[i].inputs) {
        for (const auto& field : rule.fields) {
          if (field.field == input)
            ctx.Report(aggregate_nodes[i], "the aggregate reads '" + input +
                                               "', a computed field of this collection; aggregates are "
                                               "maintained from stored fields only (aggregate its inputs)");
        }
      }
    }
  }
  if (!c["aggregates"] && !c["fields"])
    ctx.Report(c, "a computed rule needs 'aggregates', 'fields', or both");
  ctx.Step([&] {
    rule.migrating = ParseBool(ctx, c, "migrating", false);
    if (c["migrating"]) rule.adoption = rule.migrating ? Adoption::kByRule : Adoption::kOff;
    if (!rule.migrating) return;
    for (size_t i = 0; i < rule.aggregates.size(); ++i) {
      ComputedAggregate& aggregate = rule.aggregates[i];
      aggregate.migrating = true;
      for (const MaintainedField& field : aggregate.fields) {
        if (field.op == MaintainedField::Op::kLatest)
          ctx.Report(c["migrating"], "'migrating' is not supported with 'latest' fields (field '" +
                                         field.field + "' of " + aggregate.target.full() +
                                         "): fill the values with `remold reconcile --fix` while writes "
                                         "are paused");
      }
    }
  });
  ctx.Step([&] {
    std::string mode = ctx.OptionalString(c, "on_client_write", "reject", "reject or overwrite");
    if (mode == "reject") rule.on_client_write = ComputedRule::ClientWrite::kReject;
    else if (mode == "overwrite") rule.on_client_write = ComputedRule::ClientWrite::kOverwrite;
    else ctx.Fail(c["on_client_write"], "'on_client_write' must be reject or overwrite");
  });
  return rule;
}

std::vector<WrittenNamespace> ComputedRule::Writes() const {
  std::vector<WrittenNamespace> written;
  for (const ComputedAggregate& aggregate : aggregates) {
    written.push_back({aggregate.target, [target = aggregate.target](std::string_view owner) {
                         return "target '" + target.full() + "' has a rule of its own in " +
                                std::string(owner) +
                                "; remold writes maintained fields to it directly and would "
                                "bypass that rule, expected a plain collection";
                       }});
  }
  return written;
}

std::string ComputedRule::Describe() const {
  std::string out = logical.full();
  for (const ComputedAggregate& aggregate : aggregates)
    out += " -> " + aggregate.target.full() + " (" +
           std::to_string(aggregate.fields.size() + aggregate.derived.size()) + " field(s))";
  if (!fields.empty()) out += ", " + std::to_string(fields.size()) + " computed field(s)";
  if (migrating) out += ", migrating";
  return out;
}

std::string ComputedRule::OnRemoval() const {
  std::string what;
  for (const ComputedAggregate& aggregate : aggregates)
    what += (what.empty() ? "the maintained fields of " : ", ") + aggregate.target.full();
  if (!fields.empty()) what += (what.empty() ? "" : " and ") + std::string("the computed fields of ") + logical.full();
  return what + " are no longer maintained; once the rule is back, run `remold reconcile` to "
                "repair them";
}

bool ComputedRule::HasLatest() const {
  for (const ComputedAggregate& aggregate : aggregates)
    for (const MaintainedField& field : aggregate.fields)
      if (field.op == MaintainedField::Op::kLatest) return true;
  return false;
}

std::string ComputedRule::OnAddition() const {
  if (adoption != Adoption::kAuto || aggregates.empty())
    return "values computed before are not checked: run `remold reconcile` to bring them in step "
           "with the data already stored";
  return std::string("targets holding no values while sources link to them are counted: while any is left, ") +
         (HasLatest() ? "writes to " + logical.full() + " are refused until `remold reconcile --fix` has filled them"
                      : "each write recomputes the values it touches until `remold migrate` has filled them") +
         "; values computed otherwise before the rule are not checked (run `remold reconcile`)";
}

std::string ComputedRule::Unconverted() const {
  return "";  // documents stay as written; `remold reconcile` checks the values
}

std::vector<NamespaceForms> ComputedRule::Forms() const {
  // Stored as written; what the rule adds is the values it maintains.
  std::string form = std::string(kPlainForm) + "+computed";
  for (const ComputedAggregate& aggregate : aggregates) {
    form += " " + aggregate.target.full() + " by " + aggregate.link_from + "->" + aggregate.link_to + " {";
    for (size_t i = 0; i < aggregate.fields.size(); ++i)
      form += (i ? ", " : "") + aggregate.fields[i].field;
    for (const ComputedField& field : aggregate.derived) form += ", " + field.field;
    form += "}";
  }
  for (const ComputedField& field : fields) form += " " + field.field;
  NamespaceForms forms{logical, form, {form}};
  // Writes that maintain nothing are tolerated while each write recomputes
  // what it touches (or while writes are refused).
  if (migrating || unfilled_values_left) forms.reads.emplace_back(kPlainForm);
  return {forms};
}

}  // namespace remold
