// The `subset:` section of a rule file -> SubsetRule.
//
//   subset:
//     parent: products                  # "collection" (same database) or "db.collection"
//     link: productId                   # review.productId == product._id ({from: productId, to: _id})
//     array: recentReviews              # the parent's embedded array
//     sort: {at: -1}                    # the first N in this order (ties: _id)
//     limit: 10
//     fields: [author, rating, at]      # copied into each entry, after _id
//
// Mistakes are reported through the FileContext (rules/file_context.h),
// every one of them.
#include "patterns/subset/rule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "rules/copied_fields.h"
#include "rules/file_context.h"

namespace remold {
namespace {

int32_t ParseLimit(const FileContext& ctx, const YAML::Node& node) {
  int64_t value = 0;
  std::string text = TypeOf(node) == YamlType::kInt ? node.Scalar() : "";
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > SubsetRule::kMaxLimit)
    ctx.Fail(node, "'limit' is " + Found(node) + ", expected an integer from 1 to " +
                       std::to_string(SubsetRule::kMaxLimit));
  return static_cast<int32_t>(value);
}

std::vector<SubsetSortKey> ParseSort(const FileContext& ctx, const YAML::Node& node) {
  const std::string expected = "expected a mapping of field names to 1 or -1, such as {at: -1}";
  if (!node.IsMap() || node.size() == 0) ctx.Fail(node, "'sort' is " + Found(node) + ", " + expected);
  std::vector<SubsetSortKey> keys;
  std::set<std::string> seen;
  for (const auto& entry : node) {
    ctx.Step([&] {
      SubsetSortKey key;
      key.field = ctx.KeyName(entry.first, "sort key");
      if (!ctx.CheckFieldName(entry.first, key.field, "sort key")) return;
      if (!seen.insert(key.field).second) ctx.Fail(entry.first, "sort key '" + key.field + "' is given twice");
      const std::string text = TypeOf(entry.second) == YamlType::kInt ? entry.second.Scalar() : "";
      if (text != "1" && text != "-1")
        ctx.Fail(entry.second, "sort key '" + key.field + "' is " + Found(entry.second) + ", expected 1 or -1");
      key.direction = text == "1" ? 1 : -1;
      keys.push_back(std::move(key));
    });
  }
  return keys;
}

}  // namespace

SubsetRule SubsetRule::Parse(const FileContext& ctx, const YAML::Node& s, const Namespace& logical) {
  ctx.CheckKeys(s, "'subset'", {"parent", "link", "array", "sort", "limit", "fields"});
  SubsetRule rule;
  rule.logical = logical;
  ctx.Step([&] {
    std::string parent = ctx.String(s, "parent", "'subset'", "a collection name");
    if (parent.empty() || parent.find('$') != std::string::npos)
      ctx.Fail(s["parent"], "parent '" + parent + "' must be 'collection' or 'database.collection'");
    rule.parent = parent.find('.') == std::string::npos ? Namespace{logical.db, parent}
                                                        : ParseNamespace(ctx, s["parent"], parent);
    if (rule.parent == logical)
      ctx.Fail(s["parent"], "the parent is the rule's own collection, expected the collection whose "
                            "documents embed the subset");
  });
  const bool link_ok = ctx.Step([&] {
    YAML::Node link = s["link"];
    if (!link) ctx.Fail(s, "missing 'link' in 'subset', expected the child field holding the parent's _id");
    if (link.IsMap()) {
      ctx.CheckKeys(link, "'link'", {"from", "to"});
      rule.link_from = ctx.String(link, "from", "'link'", "a field name");
      ctx.CheckFieldName(link["from"], rule.link_from, "link field");
      const std::string to = ctx.OptionalString(link, "to", "_id", "a field name");
      if (to != "_id")
        ctx.Fail(link["to"], "link to '" + to + "': a subset links to the parent's _id, expected to: _id");
    } else {
      rule.link_from = ctx.StringValue(link, "'link'", "a child field name or {from: <child field>, to: _id}");
      ctx.CheckFieldName(link, rule.link_from, "link field");
    }
    if (rule.link_from == "_id")
      ctx.Fail(link, "the link is the child's _id, expected the child field that holds its parent's _id");
  });
  ctx.Step([&] {
    rule.array = ctx.String(s, "array", "'subset'", "the name of the parent's embedded array");
    if (!ctx.CheckFieldName(s["array"], rule.array, "array")) return;
    if (rule.array == "_id") ctx.Fail(s["array"], "the array cannot be the parent's _id");
  });
  const bool sort_ok = ctx.Step([&] {
    if (!s["sort"]) ctx.Fail(s, "missing 'sort' in 'subset', expected which children come first, such as {at: -1}");
    rule.sort = ParseSort(ctx, s["sort"]);
  });
  ctx.Step([&] {
    if (!s["limit"]) ctx.Fail(s, "missing 'limit' in 'subset', expected how many children the parent embeds");
    rule.limit = ParseLimit(ctx, s["limit"]);
  });
  const bool fields_ok = ctx.Step([&] {
    rule.fields = ParseCopiedFields(ctx, s, "'subset'", "the child fields copied into each entry",
                                    "it identifies the entry");
  });
  if (sort_ok && fields_ok) {
    for (const SubsetSortKey& key : rule.sort) {
      if (key.field != "_id" &&
          std::find(rule.fields.begin(), rule.fields.end(), key.field) == rule.fields.end())
        ctx.Report(s["sort"], "sort key '" + key.field +
                                  "' is not a copied field: the entries are kept in this order, so "
                                  "list it in 'fields'");
    }
  }
  if (link_ok && fields_ok && std::count(rule.fields.begin(), rule.fields.end(), rule.link_from))
    ctx.Report(s["fields"], "copied field '" + rule.link_from +
                                "' is the link: every entry of a parent holds the same value, leave it out");
  return rule;
}

std::vector<WrittenNamespace> SubsetRule::Writes() const {
  return {{parent, [parent = parent](std::string_view owner) {
             return "parent '" + parent.full() + "' has a rule of its own in " + std::string(owner) +
                    "; remold writes the subset to it directly and would bypass that rule, expected "
                    "a plain collection";
           }}};
}

std::vector<std::string> SubsetRule::Inputs() const {
  std::vector<std::string> inputs = {link_from, "_id"};
  for (const std::string& f : fields)
    if (std::find(inputs.begin(), inputs.end(), f) == inputs.end()) inputs.push_back(f);
  return inputs;
}

std::vector<SubsetSortKey> SubsetRule::Order() const {
  std::vector<SubsetSortKey> order = sort;
  if (std::none_of(order.begin(), order.end(), [](const SubsetSortKey& k) { return k.field == "_id"; }))
    order.push_back({"_id", order.back().direction});
  return order;
}

std::string SubsetRule::Describe() const {
  std::string order;
  for (const SubsetSortKey& key : sort)
    order += (order.empty() ? "" : ", ") + key.field + (key.direction < 0 ? " desc" : " asc");
  return logical.full() + " -> " + parent.full() + "." + array + " (first " + std::to_string(limit) +
         " by " + order + ", " + std::to_string(fields.size()) + " field(s))";
}

std::string SubsetRule::OnRemoval() const {
  return "the subsets in " + parent.full() + "." + array +
         " are no longer maintained; once the rule is back, run `remold reconcile` to repair them";
}

std::string SubsetRule::OnAddition() const {
  return "parents written before are not checked: run `remold reconcile --fix` to fill " + parent.full() +
         "." + array + " from the children already stored";
}

std::vector<NamespaceForms> SubsetRule::Forms() const {
  std::string form = std::string(kPlainForm) + "+subset " + parent.full() + "." + array + " by " + link_from +
                     " first " + std::to_string(limit) + " by [";
  for (size_t i = 0; i < sort.size(); ++i)
    form += (i ? ", " : "") + sort[i].field + (sort[i].direction < 0 ? " desc" : " asc");
  form += "] fields [";
  for (size_t i = 0; i < fields.size(); ++i) form += (i ? ", " : "") + fields[i];
  form += "]";
  return {{logical, form, {form}}};
}

}  // namespace remold
