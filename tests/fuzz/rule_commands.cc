#include "tests/fuzz/rule_commands.h"

#include <bson/bson.h>

#include <iterator>
#include <optional>
#include <string>

#include "tests/fuzz/fuzz_failure.h"

namespace remold::fuzz {
namespace {

// Each command's name and the arguments after the collection, as Extended JSON.
struct Template {
  const char* name;
  const char* arguments;
};
const Template kTemplates[] = {
    {"find", R"({"filter": {"a": 1}, "sort": {"t": 1}, "limit": 5})"},
    {"insert", R"({"documents": [{"_id": 1, "a": 1, "t": {"$date": 0}}, {"_id": 2, "a": 2.5}]})"},
    {"update", R"({"updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 2}}, "upsert": true}]})"},
    {"delete", R"({"deletes": [{"q": {"a": 1}, "limit": 0}]})"},
    {"aggregate", R"({"pipeline": [{"$match": {"a": 1}}, {"$group": {"_id": "$a"}}], "cursor": {}})"},
    {"findAndModify", R"({"query": {"_id": 1}, "update": {"$inc": {"a": 1}}, "new": true})"},
};

// kTemplates' arguments, parsed once.
const std::vector<Doc>& Arguments() {
  static const std::vector<Doc> parsed = [] {
    std::vector<Doc> out;
    for (const Template& t : kTemplates) {
      std::string error;
      std::optional<Doc> arguments = Doc::FromJson(t.arguments, &error);
      if (!arguments) Fail(std::string("rule_commands: ") + t.name + ": " + error);
      out.push_back(std::move(*arguments));
    }
    return out;
  }();
  return parsed;
}

}  // namespace

std::vector<Doc> CommandsOn(const Namespace& ns) {
  std::vector<Doc> commands;
  for (size_t i = 0; i < std::size(kTemplates); ++i) {
    Doc command;
    AppendString(command.mut(), kTemplates[i].name, ns.collection);
    bson_concat(command.mut(), Arguments()[i].get());
    AppendString(command.mut(), "$db", ns.db);
    commands.push_back(std::move(command));
  }
  return commands;
}

}  // namespace remold::fuzz
