#include "engine/indirect_references.h"

#include <array>
#include <map>
#include <string_view>

#include "engine/rewrites.h"
#include "rewrite/command_references.h"

namespace remold {
namespace {

// Commands that can name a collection besides the one they address.
constexpr std::array<std::string_view, 6> kMayReferenceOthers = {
    "aggregate", "create", "renameCollection", "mapReduce", "bulkWrite", "dropDatabase"};

// The rule whose logical collection `ns` is, or that writes `ns` besides it.
struct Owner {
  const Rule* rule = nullptr;
  bool logical = false;  // `ns` is the rule's logical collection
};

Owner OwnerOf(const RuleSet& rules, const Namespace& ns) {
  if (const Rule* rule = rules.Find(ns.db, ns.collection)) return {rule, true};
  for (const Rule& rule : rules.rules()) {
    for (const WrittenNamespace& w : rule.Writes())
      if (w.ns == ns) return {&rule, false};
  }
  return {};
}

std::string Prefix(const Rule& rule) {
  return std::string(rule.pattern_name()) + " rule '" + rule.name + "' for " + rule.logical().full() +
         ": ";
}

class Planner {
 public:
  Planner(const Command& command, const RuleSet& rules) : command_(command), rules_(rules) {}

  IndirectPlan Plan() {
    CommandReferences found = ReferencesOf(
        command_, [this](const Namespace& ns) { return ViewFor(ns); });
    bool writes = false;
    for (const CommandReference& reference : found.references) {
      Decide(reference);
      if (out_.refusal) return std::move(out_);
      writes = writes || reference.kind == ReferenceKind::kWrite;
    }
    if (writes)
      for (const Rule* rule : viewed_)
        for (BackendCommand& command : ViewPrerequisitesOf(*rule)) out_.prerequisites.push_back(std::move(command));
    out_.rewritten = std::move(found.rewritten);
    return std::move(out_);
  }

 private:
  // The view a read of `ns` goes through: the rule's, when it reshapes.
  const ReadView* ViewFor(const Namespace& ns) {
    const Rule* rule = rules_.Find(ns.db, ns.collection);
    if (!rule || !Reshapes(*rule)) return nullptr;
    if (out_.rule.empty()) out_.rule = rule->name;
    auto [it, inserted] = views_.try_emplace(ns.full());
    if (inserted) viewed_.push_back(rule);
    if (inserted)
      it->second = ReadView{ViewSourceOf(*rule), ViewOf(*rule), [rule](std::string_view field) {
                              return PassesThroughOf(*rule, field);
                            }};
    return &it->second;
  }

  static bool Reshapes(const Rule& rule) {
    return !ViewOf(rule).empty() || !(ViewSourceOf(rule) == rule.logical());
  }

  void Refuse(const Rule& rule, ErrorCode code, const std::string& what) {
    out_.refusal = ImmediateReply(ErrorReply(code, Prefix(rule) + what));
    out_.refusal->rule = rule.name;
    out_.rule = rule.name;
  }

  void Decide(const CommandReference& reference) {
    const Namespace& ns = reference.ns;
    switch (reference.kind) {
      case ReferenceKind::kTarget:
        if (command_.name == "mapReduce") RefuseReshaped(ns, reference.via);
        return;
      case ReferenceKind::kRead:
      case ReferenceKind::kViewOn:
        RefuseWhileReadsAre(ns, reference.via);
        return;  // read through the view (or as stored: it is stored as written)
      case ReferenceKind::kRecursiveRead:
        RefuseReshaped(ns, reference.via);
        return;
      case ReferenceKind::kWrite:
        RefuseWritten(ns, reference.via + " into " + ns.full() + " is not supported",
                      "write to it through remold (insert, update) instead");
        return;
      case ReferenceKind::kRename:
        RefuseWritten(ns, "renameCollection of " + ns.full() + " is not supported",
                      "the rule names the collection; change the rule file and migrate the data "
                      "instead");
        return;
      case ReferenceKind::kBulkWrite: {
        Owner owner = OwnerOf(rules_, ns);
        if (owner.rule && owner.logical)
          Refuse(*owner.rule, error_codes::kCommandNotSupported,
                 "bulkWrite naming " + ns.full() +
                     " is not supported; send insert, update and delete commands instead");
        return;
      }
      case ReferenceKind::kChangeStream:
        ChangeStream(ns);
        return;
      case ReferenceKind::kMetadata: {
        const Rule* rule = rules_.Find(ns.db, ns.collection);
        if (!rule) return;
        if (ViewSourceOf(*rule) == rule->logical()) {
          out_.forward = true;  // statistics of the collection as stored
          return;
        }
        Refuse(*rule, error_codes::kCommandNotSupported,
               reference.via + " on " + ns.full() + " is not supported: its documents are stored in " +
                   ViewSourceOf(*rule).full() + "; run " + reference.via + " there");
        return;
      }
      case ReferenceKind::kDropDatabase:
        DropDatabase(ns.db);
        return;
    }
  }

  // Refuses a read of `ns` while its rule refuses its own reads.
  void RefuseWhileReadsAre(const Namespace& ns, const std::string& via) {
    const Rule* rule = rules_.Find(ns.db, ns.collection);
    if (!rule) return;
    if (std::optional<std::string> why = ReadsRefusedOf(*rule))
      Refuse(*rule, error_codes::kConflictingOperationInProgress, via + " of " + ns.full() + " " + *why);
  }

  // Refuses a read that cannot go through the view of `ns`'s rule.
  void RefuseReshaped(const Namespace& ns, const std::string& via) {
    const Rule* rule = rules_.Find(ns.db, ns.collection);
    if (!rule || !Reshapes(*rule)) return;
    Refuse(*rule, error_codes::kCommandNotSupported,
           via + " on " + ns.full() + " is not supported: it would read the documents as stored, not "
           "as the application wrote them");
  }

  // Refuses a write or rename that would change `ns` around its rule.
  void RefuseWritten(const Namespace& ns, const std::string& what, const std::string& instead) {
    Owner owner = OwnerOf(rules_, ns);
    if (!owner.rule) return;
    Refuse(*owner.rule, error_codes::kInvalidOptions,
           what + ": " +
               (owner.logical ? std::string("it would bypass the rule")
                              : "the rule maintains that collection") +
               "; " + instead);
  }

  void ChangeStream(const Namespace& scope) {
    if (!scope.collection.empty()) {
      const Rule* rule = rules_.Find(scope.db, scope.collection);
      if (!rule) return;
      if (!Reshapes(*rule)) {
        out_.forward = true;  // its events are the application's documents
        return;
      }
      Refuse(*rule, error_codes::kCommandNotSupported,
             "change streams on " + scope.full() + " are not supported: their events would carry "
             "the documents as stored, not as the application wrote them");
      return;
    }
    for (const Rule& rule : rules_.rules()) {
      if (!Reshapes(rule) || (!scope.db.empty() && rule.logical().db != scope.db)) continue;
      Refuse(rule, error_codes::kCommandNotSupported,
             std::string("change streams on ") +
                 (scope.db.empty() ? "the cluster" : "database '" + scope.db + "'") +
                 " are not supported: events of " + rule.logical().full() +
                 " would carry its documents as stored; watch the other collections one by one");
      return;
    }
  }

  void DropDatabase(const std::string& db) {
    for (const Rule& rule : rules_.rules()) {
      if (rule.logical().db != db) continue;
      for (const WrittenNamespace& w : rule.Writes()) {
        if (w.ns.db == db) continue;
        Refuse(rule, error_codes::kInvalidOptions,
               "dropDatabase of '" + db + "' is not supported: the rule maintains " + w.ns.full() +
                   " in another database, which would keep values derived from the dropped "
                   "documents; drop the collections of '" + db + "' one by one (" + rule.logical().full() +
                   " once its documents are deleted), or remove the rule");
        return;
      }
    }
  }

  const Command& command_;
  const RuleSet& rules_;
  std::map<std::string, ReadView> views_;
  std::vector<const Rule*> viewed_;  // the rules of views_, in the order first read
  IndirectPlan out_;
};

}  // namespace

bool MayReferenceOthers(std::string_view command) {
  for (std::string_view name : kMayReferenceOthers)
    if (name == command) return true;
  return false;
}

IndirectPlan PlanIndirectReferences(const Command& command, const RuleSet& rules) {
  if (!MayReferenceOthers(command.name)) return {};
  return Planner(command, rules).Plan();
}

Plan ForwardPlan(const Command& command) {
  Plan plan;
  BackendCommand forwarded;
  forwarded.body = command.body;
  plan.commands.push_back(std::move(forwarded));
  plan.shape = [](std::span<const Doc> replies) {
    return ShapedReply{replies.front(), {}, {}, {}, {}, {}};
  };
  return plan;
}

}  // namespace remold
