#include "tests/fuzz/rule_sets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ruleset/loader.h"
#include "tests/fuzz/fuzz_failure.h"

namespace remold::fuzz {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<fs::path> RuleFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string RuleSetKey(const std::string& folder) {
  const fs::path dir(folder);
  if (fs::exists(dir / "rule.yaml")) return ReadText(dir / "rule.yaml");
  if (!fs::is_directory(dir / "rules")) return "";
  std::vector<fs::path> files = RuleFiles(dir / "rules");
  if (files.size() == 1) return ReadText(files[0]);
  std::string key;
  for (const fs::path& file : files) key += file.filename().string() + '\0' + ReadText(file) + '\0';
  return key;
}

std::vector<RuleSetEntry> LoadRuleSets(const std::string& list_file, const std::string& cases_dir) {
  std::ifstream list(list_file);
  if (!list) Fail("cannot read the list of rule sets " + list_file);
  std::vector<RuleSetEntry> entries;
  std::string line;
  while (std::getline(list, line)) {
    line.erase(std::find(line.begin(), line.end(), '#'), line.end());
    line.erase(line.find_last_not_of(" \t") + 1);
    if (line.empty()) continue;
    const fs::path dir = fs::path(cases_dir) / line;
    RuleLoadResult loaded;
    if (fs::exists(dir / "rule.yaml"))
      loaded = LoadRuleText(ReadText(dir / "rule.yaml"), (dir / "rule.yaml").string());
    else
      loaded = LoadRuleDirectory((dir / "rules").string());
    if (!loaded.rules) {
      std::string errors;
      for (const std::string& error : loaded.errors) errors += "\n  " + error;
      Fail(list_file + ": the rules of " + line + " do not load:" + errors);
    }
    entries.push_back({line, loaded.rules, RuleSetKey(dir.string())});
  }
  if (entries.empty()) Fail(list_file + " lists no rule set");
  return entries;
}

}  // namespace remold::fuzz
