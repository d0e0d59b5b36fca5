// The `fields` list of a rule that copies fields of one document into
// another (a subset's entries, an extended reference's copy): top-level
// names, each once, never `_id` (always copied), at least one. Internal to
// the patterns' rule parsers; mistakes go to the FileContext.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "rules/file_context.h"

namespace remold {

// `section`'s `fields`; `what` says what they are copied from and into
// ("the child fields copied into each entry"), `why_id` why _id is not
// listed ("it identifies the entry").
inline std::vector<std::string> ParseCopiedFields(const FileContext& ctx, const YAML::Node& section,
                                                  const std::string& where, const std::string& what,
                                                  const std::string& why_id) {
  if (!section["fields"]) ctx.Fail(section, "missing 'fields' in " + where + ", expected " + what);
  const YAML::Node node = section["fields"];
  std::vector<std::string> fields;
  std::set<std::string> seen;
  for (std::string& field : ctx.StringList(section, "fields")) {
    if (!ctx.CheckFieldName(node, field, "copied field")) continue;
    if (field == "_id") {
      ctx.Report(node, "'_id' is always copied (" + why_id + "); list the other fields");
    } else if (!seen.insert(field).second) {
      ctx.Report(node, "copied field '" + field + "' is listed twice");
    } else {
      fields.push_back(std::move(field));
    }
  }
  if (node.IsSequence() && node.size() == 0) ctx.Report(node, "'fields' is empty, expected " + what);
  return fields;
}

}  // namespace remold
