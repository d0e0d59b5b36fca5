// `remold check DIR` and `remold explain --rules DIR --db DB 'JSON'`: the
// rule validator and the dry run of the rewrite engine. No backend needed.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace remold {

// Returns the process exit code.
int RunCheck(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace remold
