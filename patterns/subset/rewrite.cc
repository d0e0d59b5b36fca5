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
  std::vector<std::unique_ptr<Follower>> Followers(const FollowerContext& context) const override {
    std::vector<std::unique_ptr<Follower>> followers;
    followers.push_back(std::make_unique<SubsetFollower>(rule_, context));
    return followers;
  }

 private:
  SubsetRule rule_;
};

}  // namespace

std::optional<Plan> RewritePattern(const Command& command, const Rule& base, const SubsetRule& rule,
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
