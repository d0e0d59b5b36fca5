// The attribute pattern's updates of attributes (see attribute.h): the
// split of update operators, and the multi-step plan that applies them
// safely under concurrent writers. Pure, like the rest of rewrite/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "patterns/attribute/rule.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

// One attribute operation of an update: {op: {name: value}}.
struct AttributeOp {
  std::string op;
  std::string name;
  Doc value;  // {v: <the operator's argument>}, owned: the update may go away
};

// Splits the operators of `u` into those on fixed fields (`fixed`) and
// those on attributes (`ops`), or says why it cannot.
std::optional<Refusal> SplitAttributeUpdate(const AttributeRule& rule, const Doc& u,
                                                  Doc& fixed, std::vector<AttributeOp>& ops);

// Whether `filter` can match a document because attribute `name` is
// missing (negated forms, null, $exists: false, anything under $nor).
bool TestsAbsence(const bson_t* filter, const std::string& name, bool negated = false);

bool IsOperatorUpdate(const Doc& u);

// What mongod answers for a statement it rejects before changing anything.
Plan StatementWriteError(size_t index, ErrorCode code, const std::string& message);

// While the rule is migrating: a read of the whole documents `filter`
// matches (one unless the statement is multi; with its collation), to be
// converted before the statement touches them; and, from its reply, one
// guarded replacement per document (each only if unchanged since read;
// none when nothing converts).
BackendCommand DocumentsToConvertRead(const Command& command, const AttributeRule& rule, const Doc& statement,
                                      const Doc& filter);
std::vector<BackendCommand> ConversionWrites(const Command& command, const AttributeRule& rule,
                                             const Doc& read_reply, MigrationDirection direction);
// How many times the read and its conversions run (AfterPrelude's rounds):
// an updateMany's read is a batch, read again until nothing is left.
int ConversionRounds(bool multi);

// The plan of an update statement that changes attributes; `filter` is the
// statement's filter already rewritten. See attribute_update.cc.
Plan AttributeUpdatePlan(const Command& command, const AttributeRule& rule, const Doc& statement,
                         const Doc& filter, const Doc& fixed_ops, const std::vector<AttributeOp>& ops);

}  // namespace remold
