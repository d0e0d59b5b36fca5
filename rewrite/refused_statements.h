// A write command (insert, update, delete) of which a rule refuses some
// statements, answered as mongod answers statements that fail: one write
// error per refused statement, with the statement's index and the
// refusal's code, so that drivers raise their bulk write error and the
// application learns what was applied.
//
//   ordered (the default): the statements before the first refused one
//     run, that one is reported, and none after it runs (nor is reported);
//   unordered: every other statement runs, and each refused one is
//     reported.
//
// The statements that run go to the backend as the client's command with
// only those statements, planned by `plan_rest` (the rule's own rewrite;
// nullopt: that command goes to the backend as it is);
// the indexes of its reply's writeErrors and upserted are the client's
// again. Inside a transaction a write error would abort it, so there the
// whole command is refused with the first refusal, as before.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

struct StatementRefusal {
  size_t index;  // in the client's statements
  Refusal refusal;
};

Plan WithRefusedStatements(const Command& client, std::string_view statements_key,
                           std::vector<StatementRefusal> refused,
                           const std::function<std::optional<Plan>(const Command& rest)>& plan_rest);

}  // namespace remold
