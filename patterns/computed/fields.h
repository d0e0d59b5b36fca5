// Same-document computed fields (ComputedRule::fields): the values set on
// inserts and replacements before they are stored, what a client may write
// of them, and the repair after an update changed their inputs.
// Pure.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "patterns/computed/rule.h"
#include "patterns/source_writes/update_apply.h"
#include "rewrite/command.h"
#include "rewrite/command_queue.h"

namespace remold {

// `doc` with every computed field set to its value: a client's value is
// overwritten, or refused (ImmutableField) when the rule rejects client
// writes and it differs. An expression that cannot be evaluated refuses
// the document (TypeMismatch).
std::optional<Refusal> WithComputedFields(const ComputedRule& rule, const bson_t* doc,
                                                 Doc& out);

// The update to send for a client's `update`: replacements get their
// computed fields; operators on computed fields are refused or dropped as
// the rule says.
std::optional<Refusal> PrepareUpdate(const ComputedRule& rule, const ClientUpdate& update,
                                            ClientUpdate& out);

// Top-level fields the computed fields read.
std::vector<std::string> ComputedInputs(const ComputedRule& rule);

// Queues the repair of documents `ids` (each {v: _id}) after an update:
// read them, compute, and set what differs where the inputs are unchanged
// (a miss means a later writer changed them and repairs them itself).
// Inside the client's transaction a failure calls `abort` with the error
// instead (the backend aborted the transaction).
void ScheduleComputedRepair(CommandQueue& queue, const ComputedRule& rule, const Command& client,
                            std::vector<Doc> ids, std::vector<std::string>* warnings,
                            std::function<void(const Doc& error)> abort);

}  // namespace remold
