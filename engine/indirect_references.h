// What remold does about every namespace a command references besides the
// one its rule serves (rewrite/command_references.h lists them): a ruled
// collection reached from elsewhere is read through its pattern's view, or
// the command is refused with an error that names the rule. Nothing reaches
// the stored form unnoticed.
//
// "Ruled" is the logical collection of a rule, or a collection a rule
// writes besides it (Rule's Writes(): a bucket collection, a computed
// rule's targets). Those are ordinary collections for direct commands, but
// never the output of $out, $merge or mapReduce, nor either end of a rename.
//
//   $lookup, $unionWith, create {viewOn}  read through the view
//   $graphLookup                          refused (115) when the view reshapes
//   $out, $merge, mapReduce out           refused (72)
//   renameCollection                      refused (72)
//   mapReduce on the collection           refused (115) when the view reshapes
//   bulkWrite (8.0) naming it             refused (115)
//   $changeStream                         refused (115) on a collection (its
//                                         database, the cluster) whose view
//                                         reshapes; forwarded otherwise
//   $collStats, $indexStats               forwarded when the documents live in
//                                         the collection itself; refused (115)
//   dropDatabase                          refused (72) when a rule of that
//                                         database writes to another one
//
// "Reshapes": the view has stages or reads another collection.
//
// Pure; cheap for commands that can name no other collection.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "ruleset/rule_set.h"

namespace remold {

struct IndirectPlan {
  std::optional<Plan> refusal;       // set: answer with it
  std::optional<Command> rewritten;  // the command to go on with
  // Forward (`rewritten` or the command) without the target rule's rewrite:
  // the command is about the collection as stored ($collStats, a change
  // stream on a collection stored as written).
  bool forward = false;
  std::string rule;  // the rule that decided, for logs and metrics
  // For a command that writes its output ($out, $merge) and reads a ruled
  // collection through its view: what that view needs to exist first
  // (engine/rewrites.h, ViewPrerequisites), for the plan's ensure.
  std::vector<BackendCommand> prerequisites;
};

IndirectPlan PlanIndirectReferences(const Command& command, const RuleSet& rules);

// Whether a command of this name can reference a collection besides the one
// it addresses (PlanIndirectReferences returns an empty plan for the rest).
bool MayReferenceOthers(std::string_view command);

// A plan that sends `command` (already complete: generic arguments, $db)
// and relays the reply as it is.
Plan ForwardPlan(const Command& command);

}  // namespace remold
