#include "patterns/subset/rewrite.h"

#include "patterns/source_writes/source_write.h"
#include "patterns/subset/follower.h"

namespace remold {
namespace {

// The subset rule as the shared write flows see it: one follower.
class SubsetSource final : public SourceRule {
 public:
  explicit SubsetSource(const SubsetRule& rule) : rule_(rule) {}

  const Namespace& source() const override { return rule_.logical; }
  std::string Kind() const override { return "a subset rule"; }
  std::vector<std::string> Watched() const override { return rule_.Inputs(); }
  std::vector<std::string> FollowUps(const std::string& name) const override {
    const std::string array = rule_.parent.full() + "." + rule_.array;
    std::string order;
    for (const SubsetSortKey& key : rule_.Order())
      order += (order.empty() ? "" : ", ") + key.field + ": " + std::to_string(key.direction);
    const std::string refill = "refill: read the parent's " + rule_.array + ", then its first " +
                               std::to_string(rule_.limit) + " children (sort {" + order +
                               "}); if they differ, set the array where the parent still holds what was "
                               "read, and read both again until they agree";
    if (name == "insert")
      return {"push the children inserted onto " + array + ": one update, one statement per parent ($each, "
              "$sort {" + order + "}, $slice " + std::to_string(rule_.limit) +
              "), where the parent has the array and none of them yet",
              "read the children pushed back by _id: a parent whose push matched nothing, or whose child "
              "changed meanwhile, is refilled",
              refill};
    if (name == "delete")
      return {"each child is removed by findAndModify (remove: true), so the children removed are known",
              "pull them from " + array + ", one update per parent; a parent that held one is refilled", refill};
    return {"each child matched is changed by findAndModify (new: false), so what it was is known",
            "the parent a changed child was in, and the one it is in now, are refilled", refill};
  }
  std::vector<std::unique_ptr<Follower>> Followers(const FollowerContext& context) const override {
    std::vector<std::unique_ptr<Follower>> followers;
    followers.push_back(std::make_unique<SubsetFollower>(rule_, context));
    return followers;
  }

 private:
  SubsetRule rule_;
};

}  // namespace

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& base, const SubsetRule& rule,
                                   const Capabilities&) {
  const std::string& name = command.name;
  if (name == "drop")
    return FollowedDrop(command, rule.logical,
                        "subset rule '" + base.name + "' for " + rule.logical.full() +
                            ": drop of children that still exist is not supported: " + rule.parent.full() + "." +
                            rule.array + " would keep embedding them. Delete the documents first "
                            "(deleteMany({}) is maintained), then drop");
  auto source = std::make_shared<const SubsetSource>(rule);
  if (name == "insert") return FollowedInsert(command, source);
  if (name == "delete") return FollowedDelete(command, source);
  if (name == "update") return FollowedUpdate(command, source);
  if (name == "findAndModify" || name == "findandmodify") return FollowedFindAndModify(command, source);
  return std::nullopt;
}

}  // namespace remold
