#include "patterns/extended_reference/rewrite.h"

#include <set>

#include "patterns/extended_reference/copies.h"
#include "patterns/extended_reference/referencing_writes.h"
#include "patterns/source_writes/source_write.h"
#include "rewrite/command_namespace.h"

namespace remold {
namespace {

// The referenced documents that changed: each one's copies synced.
class ReferencedChanges final : public Follower {
 public:
  ReferencedChanges(const ExtendedReferenceRule& rule, const FollowerContext& context)
      : rule_(rule), sync_(rule, context) {}

  void Record(const bson_t* before, const bson_t* after) override {
    const bson_t* doc = after ? after : before;
    std::optional<bson_iter_t> id = doc ? Find(doc, "_id") : std::nullopt;
    if (!id) return;
    if (before && after && CopyOf(rule_, before) == CopyOf(rule_, after)) return;  // no copied field changed
    if (seen_.insert(KeyOf(*id)).second) changed_.push_back(Boxed(*id));
  }
  void Schedule(CommandQueue& queue) override {
    queue.AddPhase([this, &queue] {
      for (Doc& id : changed_) sync_.Schedule(queue, std::move(id));
      changed_.clear();
    });
  }

 private:
  ExtendedReferenceRule rule_;
  CopySync sync_;
  std::vector<Doc> changed_;
  std::set<std::string> seen_;
};

// The referenced collection as the shared write flows see it (synced mode).
class ReferencedSource final : public SourceRule {
 public:
  explicit ReferencedSource(const ExtendedReferenceRule& rule) : rule_(rule) {}

  const Namespace& source() const override { return rule_.referenced; }
  std::string Kind() const override { return "referenced by a synced extended reference rule"; }
  std::vector<std::string> Watched() const override {
    std::vector<std::string> watched = {"_id"};
    watched.insert(watched.end(), rule_.fields.begin(), rule_.fields.end());
    return watched;
  }
  std::vector<std::string> FollowUps(const std::string& name) const override {
    std::vector<std::string> lines;
    if (name != "insert")
      lines.push_back("each document matched is changed by findAndModify, so what it was is known");
    lines.push_back("each document whose copied fields changed has its copies synced: " + SyncLine(rule_));
    return lines;
  }
  std::vector<std::unique_ptr<Follower>> Followers(const FollowerContext& context) const override {
    std::vector<std::unique_ptr<Follower>> followers;
    followers.push_back(std::make_unique<ReferencedChanges>(rule_, context));
    return followers;
  }

 private:
  ExtendedReferenceRule rule_;
};

bool IsWrite(const std::string& name) {
  return name == "insert" || name == "update" || name == "delete" || name == "findAndModify" ||
         name == "findandmodify";
}

}  // namespace

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& base, const ExtendedReferenceRule& rule,
                                   const Capabilities&) {
  const std::string& name = command.name;
  std::optional<CommandNamespace> ns = ResolveNamespace(name, command.body.get());
  if (!ns || !ns->collection) return std::nullopt;
  if (ns->db == rule.referenced.db && *ns->collection == rule.referenced.collection) {
    // The referenced collection (synced: the rule watches it).
    if (name == "drop")
      return FollowedDrop(command, rule.referenced,
                          rule.Who() + ": drop of " +
                              rule.referenced.full() + " while it has documents is not supported: the copies in " +
                              rule.logical.full() + "." + rule.into +
                              " would keep them. Delete the documents first (deleteMany({}) is synced), then drop");
    if (!IsWrite(name)) return std::nullopt;
    auto source = std::make_shared<const ReferencedSource>(rule);
    if (name == "insert") return FollowedInsert(command, source);
    if (name == "delete") return FollowedDelete(command, source);
    if (name == "update") return FollowedUpdate(command, source);
    return FollowedFindAndModify(command, source);
  }
  if (name == "insert") return ReferencingInsert(command, rule);
  if (name == "update") return ReferencingUpdate(command, rule);
  if (name == "findAndModify" || name == "findandmodify") return ReferencingFindAndModify(command, rule);
  return std::nullopt;
}

}  // namespace remold
