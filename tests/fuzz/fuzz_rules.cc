// libFuzzer target of the rule loader (ruleset/loader.h): one input is the
// text of one rule file, or of several, split at lines "#--- next file ---"
// (named r0.yaml, r1.yaml, ...; loaded together with LoadRuleTexts, as a
// rules directory holding them would be).
//
// Whatever the text, loading gives a RuleSet or errors, never both, and
// never throws: each error reads "FILE:LINE: message" with a file given
// and a line from 1. A RuleSet holds one rule per file, and each rule is
// usable: its descriptions, its view and the filter of its unconverted
// documents (valid Extended JSON) are made, so is its migration part
// (tests/fuzz/migration_checks.h), and fixed commands
// (tests/fuzz/rule_commands.h) on its collection and on each one it
// watches go through the engine as the proxy sends them
// (tests/fuzz/proxy_path.h), with every output checked.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/rewrites.h"
#include "ruleset/loader.h"
#include "tests/fuzz/fuzz_failure.h"
#include "tests/fuzz/migration_checks.h"
#include "tests/fuzz/proxy_path.h"
#include "tests/fuzz/reply_feed.h"
#include "tests/fuzz/rule_commands.h"

namespace {

using namespace remold;
using fuzz::Fail;
using fuzz::Require;

constexpr std::string_view kFileSeparator = "\n#--- next file ---\n";

std::vector<RuleFileText> SplitFiles(std::string_view text) {
  std::vector<RuleFileText> files;
  while (true) {
    size_t cut = text.find(kFileSeparator);
    std::string source = "r" + std::to_string(files.size()) + ".yaml";
    files.push_back({source, std::string(text.substr(0, cut))});
    if (cut == std::string_view::npos) return files;
    text.remove_prefix(cut + kFileSeparator.size());
  }
}

// "FILE:LINE: message", FILE one of `files`, LINE from 1, a message.
void CheckError(const std::string& error, const std::vector<RuleFileText>& files) {
  for (const RuleFileText& file : files) {
    if (error.compare(0, file.source.size() + 1, file.source + ":") != 0) continue;
    size_t at = file.source.size() + 1;
    size_t digits = 0;
    while (at + digits < error.size() && std::isdigit(static_cast<unsigned char>(error[at + digits])))
      ++digits;
    Require(digits > 0 && digits < 10, "an error without a line number");
    Require(std::stol(error.substr(at, digits)) >= 1, "an error at a line before the first");
    Require(error.compare(at + digits, 2, ": ") == 0 && error.size() > at + digits + 2,
            "an error without a message");
    return;
  }
  Fail("an error that names no file given: " + error);
}

void CheckRule(const Rule& rule, const RuleSet& rules) {
  Require(!rule.Describe().empty(), "a rule without a description");
  rule.OnRemoval();
  rule.OnAddition();
  rule.FieldsWrittenElsewhere();
  rule.Writes();
  for (const PatternRule* layer : rule.layers()) {
    std::string filter = std::visit([](const auto& p) { return p.Unconverted(); }, *layer);
    std::string error;
    if (!filter.empty() && !Doc::FromJson(filter, &error))
      Fail("the filter of unconverted documents is not Extended JSON: " + error + ": " + filter);
  }
  ViewOf(rule);
  ViewSourceOf(rule);
  PassesThroughOf(rule, "a");
  fuzz::CheckMigrations(rule);

  std::vector<Namespace> targets = rule.Watches();
  targets.insert(targets.begin(), rule.logical());
  for (const Namespace& ns : targets) {
    for (const Doc& command : fuzz::CommandsOn(ns)) {
      fuzz::ReplyFeed replies;
      fuzz::RunAsProxy({command.bytes(), true}, rules, Capabilities{}, replies);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<RuleFileText> files =
      SplitFiles({reinterpret_cast<const char*>(data), size});
  RuleLoadResult loaded = LoadRuleTexts(files);
  Require((loaded.rules == nullptr) == !loaded.errors.empty(), "a load that gives both a RuleSet and errors, or neither");
  for (const std::string& error : loaded.errors) CheckError(error, files);
  if (!loaded.rules) return 0;
  Require(loaded.rules->rules().size() == files.size(), "a RuleSet without one rule per file");
  for (const Rule& rule : loaded.rules->rules()) CheckRule(rule, *loaded.rules);
  return 0;
}
