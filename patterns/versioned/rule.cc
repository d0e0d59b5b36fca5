// The `versioned:` section of a rule file -> VersionedRule.
//
//   versioned:
//     field: schemaVersion            # where each document keeps its version
//     write_back: false               # store documents read at an older version upgraded
//     versions:                       # ascending integers; the last is current
//       - version: 1                  # documents without the field are at the first
//       - version: 2
//         upgrade:                    # the steps from the version before, in order
//           - rename: {from: name, to: fullName}
//           - default: {field: country, value: "US"}
//           - compute: {field: first, expression: {part: {of: fullName, by: " ", index: 0}}}
//           - convert: {field: zip, to: string}        # string, int, long, double
//           - move: {fields: [street, city], into: address}
//           - move: {fields: [street], out_of: address}
//           - remove: [legacy]
//
// Mistakes are reported through the FileContext (rules/file_context.h),
// every one of them.
#include "patterns/versioned/rule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/doc.h"
#include "rules/file_context.h"

namespace remold {

std::vector<std::string> UpgradeStep::Changes() const {
  switch (kind) {
    case Kind::kRename: return {field, to};
    case Kind::kMoveInto:
    case Kind::kMoveOutOf: {
      std::vector<std::string> out = fields;
      out.push_back(field);
      return out;
    }
    case Kind::kRemove: return fields;
    default: return {field};
  }
}

bool VersionedRule::Changes(std::string_view name) const {
  if (name == field) return true;
  for (const DocumentVersion& version : versions) {
    for (const UpgradeStep& step : version.upgrade) {
      for (const std::string& changed : step.Changes())
        if (changed == name) return true;
    }
  }
  return false;
}

std::vector<std::string> VersionedRule::FieldsWritten() const {
  std::vector<std::string> written{field};
  for (const DocumentVersion& version : versions)
    for (const UpgradeStep& step : version.upgrade)
      for (const std::string& changed : step.Changes())
        if (std::find(written.begin(), written.end(), changed) == written.end()) written.push_back(changed);
  return written;
}

namespace {

const std::map<std::string, UpgradeStep::Type>& TypeNames() {
  static const std::map<std::string, UpgradeStep::Type> kTypes = {
      {"string", UpgradeStep::Type::kString},
      {"int", UpgradeStep::Type::kInt},
      {"long", UpgradeStep::Type::kLong},
      {"double", UpgradeStep::Type::kDouble},
  };
  return kTypes;
}

// A field a step names: top-level, and neither _id nor the version field.
std::string StepField(const FileContext& ctx, const YAML::Node& node, const std::string& what,
                      const std::string& version_field) {
  std::string name = ctx.StringValue(node, what, "a field name");
  if (name.empty() || name.find('.') != std::string::npos || name[0] == '$')
    ctx.Fail(node, what + " is '" + name + "', expected a top-level field name (no '.', not starting with '$')");
  if (name == "_id") ctx.Fail(node, what + " is '_id', which an upgrade cannot change");
  if (name == version_field)
    ctx.Fail(node, what + " is '" + name + "', the version field, which remold maintains");
  return name;
}

std::vector<std::string> StepFields(const FileContext& ctx, const YAML::Node& node, const std::string& what,
                                    const std::string& version_field) {
  std::vector<std::string> out;
  if (node.IsSequence()) {
    for (const auto& item : node) out.push_back(StepField(ctx, item, "an item of " + what, version_field));
  } else {
    out.push_back(StepField(ctx, node, what, version_field));
  }
  if (out.empty()) ctx.Fail(node, what + " must name at least one field");
  return out;
}

// The expressions a read can run as aggregation exactly as evaluated in
// C++ (patterns/expression/aggregation.h): strings joined and split.
void CheckUpgradeExpression(const FileContext& ctx, const YAML::Node& node, const Expression& e, int depth) {
  const bool top = depth == 1;
  switch (e.kind) {
    case Expression::Kind::kConcat:
    case Expression::Kind::kPart:
      if (depth > VersionedRule::kMaxUpgradeExpressionDepth)
        ctx.Fail(node, "an upgrade's expression nests 'concat' and 'part' more than " +
                           std::to_string(VersionedRule::kMaxUpgradeExpressionDepth) +
                           " levels deep (each level nests the stage that upgrades documents on reads "
                           "deeper, and a stage must stay under 100 levels of nesting)");
      for (const Expression& operand : e.operands) CheckUpgradeExpression(ctx, node, operand, depth + 1);
      return;
    case Expression::Kind::kField:
      if (!top) return;
      ctx.Fail(node, "an upgrade's expression that is only a field path copies it: use 'rename', or "
                     "'concat' and 'part' to build a string");
    case Expression::Kind::kLiteral:
      if (!top && std::holds_alternative<std::string>(e.literal)) return;
      ctx.Fail(node, top ? "an upgrade's expression that is only a literal: use 'default'"
                         : "a literal in an upgrade's 'concat' must be a string");
    default:
      ctx.Fail(node, "an upgrade computes strings with 'concat' and 'part' (over fields and "
                     "string literals); other operators are not supported in upgrades");
  }
}

Expression::Literal ScalarValue(const FileContext& ctx, const YAML::Node& node) {
  switch (TypeOf(node)) {
    case YamlType::kNull: return std::monostate{};
    case YamlType::kBool: return node.Scalar()[0] == 't' || node.Scalar()[0] == 'T';
    case YamlType::kInt: return node.as<int64_t>();
    case YamlType::kFloat: return node.as<double>();
    case YamlType::kString: return node.Scalar();
    default:
      ctx.Fail(node, "'value' is " + Found(node) + ", expected a string, number, true, false or null");
  }
}

UpgradeStep ParseStep(const FileContext& ctx, const YAML::Node& node, const std::string& version_field) {
  static const std::set<std::string> kSteps = {"rename", "default", "compute", "convert", "move", "remove"};
  std::string steps;
  for (const auto& name : kSteps) steps += (steps.empty() ? "" : ", ") + name;
  if (!node.IsMap() || node.size() != 1 || !node.begin()->first.IsScalar() ||
      !kSteps.count(node.begin()->first.Scalar()))
    ctx.Fail(node, "an upgrade step is a mapping with one key, one of: " + steps);
  const std::string name = node.begin()->first.Scalar();
  const YAML::Node spec = node.begin()->second;
  UpgradeStep step;
  if (name == "remove") {
    step.kind = UpgradeStep::Kind::kRemove;
    step.fields = StepFields(ctx, spec, "'remove'", version_field);
    return step;
  }
  if (!spec.IsMap()) ctx.Fail(spec, "'" + name + "' is " + Found(spec) + ", expected a mapping");
  auto field = [&](const std::string& key) {
    if (!spec[key]) ctx.Fail(spec, "'" + name + "' needs '" + key + "'");
    return StepField(ctx, spec[key], "'" + key + "'", version_field);
  };
  if (name == "rename") {
    ctx.CheckKeys(spec, "'rename'", {"from", "to"});
    step.kind = UpgradeStep::Kind::kRename;
    step.field = field("from");
    step.to = field("to");
    if (step.field == step.to) ctx.Fail(spec, "'rename' from and to the same field");
  } else if (name == "default") {
    ctx.CheckKeys(spec, "'default'", {"field", "value"});
    step.kind = UpgradeStep::Kind::kDefault;
    step.field = field("field");
    if (!spec["value"]) ctx.Fail(spec, "'default' needs 'value'");
    step.value = ScalarValue(ctx, spec["value"]);
  } else if (name == "compute") {
    ctx.CheckKeys(spec, "'compute'", {"field", "expression"});
    step.kind = UpgradeStep::Kind::kCompute;
    step.field = field("field");
    if (!spec["expression"]) ctx.Fail(spec, "'compute' needs 'expression'");
    std::set<std::string> inputs;
    step.expression = ParseExpression(ctx, spec["expression"], inputs);
    CheckUpgradeExpression(ctx, spec["expression"], step.expression, 1);
  } else if (name == "convert") {
    ctx.CheckKeys(spec, "'convert'", {"field", "to"});
    step.kind = UpgradeStep::Kind::kConvert;
    step.field = field("field");
    std::string to = ctx.String(spec, "to", "'convert'", "string, int, long or double");
    auto type = TypeNames().find(to);
    if (type == TypeNames().end())
      ctx.Fail(spec["to"], "'to' is '" + to + "', expected string, int, long or double");
    step.type = type->second;
  } else {  // move
    ctx.CheckKeys(spec, "'move'", {"fields", "into", "out_of"});
    if (bool(spec["into"]) == bool(spec["out_of"]))
      ctx.Fail(spec, "'move' needs either 'into' or 'out_of' (the subdocument), not both");
    step.kind = spec["into"] ? UpgradeStep::Kind::kMoveInto : UpgradeStep::Kind::kMoveOutOf;
    step.field = field(spec["into"] ? "into" : "out_of");
    if (!spec["fields"]) ctx.Fail(spec, "'move' needs 'fields'");
    step.fields = StepFields(ctx, spec["fields"], "'fields'", version_field);
    if (std::count(step.fields.begin(), step.fields.end(), step.field))
      ctx.Fail(spec, "'move' names '" + step.field + "' both as a field and as the subdocument");
  }
  return step;
}

DocumentVersion ParseVersion(const FileContext& ctx, const YAML::Node& node, bool first,
                             const std::string& version_field) {
  if (!node.IsMap()) ctx.Fail(node, "a version is " + Found(node) + ", expected {version: N, upgrade: [...]}");
  ctx.CheckKeys(node, "a version", {"version", "upgrade"});
  DocumentVersion version;
  if (!node["version"] || TypeOf(node["version"]) != YamlType::kInt)
    ctx.Fail(node, "a version needs 'version', an integer");
  int64_t number = node["version"].as<int64_t>();
  if (number < 0 || number > 1000000)
    ctx.Fail(node["version"], "'version' is " + std::to_string(number) + ", expected 0 to 1000000");
  version.number = static_cast<int32_t>(number);
  const YAML::Node upgrade = node["upgrade"];
  if (!upgrade) return version;
  if (first)
    ctx.Fail(upgrade, "the first version has no 'upgrade': documents without the version field are at it");
  if (!upgrade.IsSequence()) ctx.Fail(upgrade, "'upgrade' is " + Found(upgrade) + ", expected a list of steps");
  if (upgrade.size() > VersionedRule::kMaxUpgradeSteps)
    ctx.Fail(upgrade, "version " + std::to_string(number) + "'s 'upgrade' has " + std::to_string(upgrade.size()) +
                          " steps, at most " + std::to_string(VersionedRule::kMaxUpgradeSteps) +
                          ": split them over more versions (each step nests the stage that upgrades "
                          "documents on reads deeper, and a stage must stay under 100 levels of nesting)");
  for (const auto& item : upgrade)
    ctx.Step([&] { version.upgrade.push_back(ParseStep(ctx, item, version_field)); });
  return version;
}

}  // namespace

VersionedRule VersionedRule::Parse(const FileContext& ctx, const YAML::Node& v, const Namespace& logical) {
  ctx.CheckKeys(v, "'versioned'", {"field", "versions", "write_back"});
  VersionedRule rule;
  rule.logical = logical;
  bool field_ok = ctx.Step([&] {
    rule.field = ctx.OptionalString(v, "field", rule.field, "a field name");
    if (v["field"]) ctx.CheckFieldName(v["field"], rule.field, "'field'");
    if (rule.field == "_id") ctx.Fail(v["field"], "'field' is '_id', expected the field that holds the version");
  });
  ctx.Step([&] { rule.write_back = ParseBool(ctx, v, "write_back", false); });
  if (!field_ok) return rule;
  ctx.Step([&] {
    const YAML::Node list = v["versions"];
    if (!list) ctx.Fail(v, "missing 'versions' in 'versioned', expected the list of versions, oldest first");
    if (!list.IsSequence() || list.size() < 2)
      ctx.Fail(list, "'versions' must list at least two versions, oldest first");
    if (list.size() > VersionedRule::kMaxVersions)
      ctx.Fail(list, "'versions' lists " + std::to_string(list.size()) + " versions, at most " +
                         std::to_string(VersionedRule::kMaxVersions) +
                         ": reads upgrade older documents through one aggregation stage per version, and "
                         "MongoDB refuses pipelines of more than 1000 stages");
    for (size_t i = 0; i < list.size(); ++i) {
      ctx.Step([&] {
        DocumentVersion version = ParseVersion(ctx, list[i], i == 0, rule.field);
        if (!rule.versions.empty() && version.number <= rule.versions.back().number)
          ctx.Fail(list[i], "version " + std::to_string(version.number) + " follows version " +
                                std::to_string(rule.versions.back().number) + ", expected ascending versions");
        rule.versions.push_back(std::move(version));
      });
    }
  });
  if (rule.versions.size() < 2) rule.versions.resize(2);  // the file is refused: keep current() defined
  return rule;
}

std::string VersionedRule::Describe() const {
  return logical.full() + " (versions " + std::to_string(first()) + ".." + std::to_string(current()) +
         " in '" + field + "'" + (write_back ? ", write-back" : "") + ")";
}

std::string VersionedRule::OnRemoval() const {
  return "documents not yet at version " + std::to_string(current()) + " stay as stored: reads of " +
         logical.full() + " return them in their older shapes, and writes no longer set '" + field +
         "', until the rule is back";
}

std::string VersionedRule::OnAddition() const {
  return "documents already in " + logical.full() + " without '" + field + "' are read as version " +
         std::to_string(first()) + " and upgraded on every read until `remold migrate` stores them upgraded";
}

std::string VersionedRule::OlderVersionValues() const {
  std::string older = "null";
  for (const DocumentVersion& version : versions)
    if (version.number != current()) older += ", " + std::to_string(version.number);
  return "[" + older + "]";
}

std::string VersionedRule::Unconverted() const {
  return "{" + JsonQuote(field) + ": {\"$in\": " + OlderVersionValues() + "}}";
}

std::vector<NamespaceForms> VersionedRule::Forms() const {
  // Each version by its number and the changes of its upgrade steps.
  auto version = [&](const DocumentVersion& v) {
    std::string text = "versioned " + field + " " + std::to_string(v.number) + " [";
    for (size_t i = 0; i < v.upgrade.size(); ++i) {
      text += i ? "; " : "";
      for (const std::string& changed : v.upgrade[i].Changes()) text += changed + " ";
    }
    return text + "]";
  };
  NamespaceForms forms{logical, version(versions.back()), {}};
  for (const DocumentVersion& v : versions) forms.reads.push_back(version(v));
  return {forms};
}

}  // namespace remold
