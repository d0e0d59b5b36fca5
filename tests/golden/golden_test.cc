// Golden tests of the rewrite engine: one test per folder
// cases/<pattern>/<case>/ (see README.md for the files a case holds).
//
// A case runs the pure engine the way the proxy does (proxy/session.cc):
// Rewrite(command, rules, capabilities) -> Plan; the plan's ensure commands
// and commands are compared with commands.json; the recorded backend replies
// (replies.json) are fed through the proxy's own PlanRunner
// (rewrite/plan_runner.h), and the client's reply is compared with reply.json.
//
// REMOLD_GOLDEN_UPDATE=1 rewrites the expected files from the actual output.
// Review every rewritten file by hand before keeping it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/doc.h"
#include "engine/engine.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rewrite/plan_runner.h"
#include "ruleset/loader.h"
#include "tests/golden/case_folders.h"

#ifndef REMOLD_GOLDEN_DIR
#error "REMOLD_GOLDEN_DIR must name the cases directory"
#endif

namespace remold {
namespace {

namespace fs = std::filesystem;
using namespace golden;  // tests/golden/case_folders.h

// ---------------------------------------------------------------------------
// Files

std::string CasesDir() {
  if (const char* dir = std::getenv("REMOLD_GOLDEN_DIR")) return dir;
  return REMOLD_GOLDEN_DIR;
}

// Parses a JSON document; a top-level array parses as {"0": .., "1": ..}.
std::optional<Doc> ParseJsonFile(const fs::path& path, std::string* error) {
  std::string text = ReadFile(path);
  std::string parse_error;
  std::optional<Doc> doc = Doc::FromJson(text, &parse_error);
  if (!doc) *error = path.string() + ": not Extended JSON: " + parse_error;
  return doc;
}

std::vector<Doc> ArrayItems(const Doc& array) {
  std::vector<Doc> items;
  bson_iter_t it;
  bson_iter_init(&it, array.get());
  while (bson_iter_next(&it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&it, &length, &data);
    items.push_back(Doc::FromBytes({data, length}));
  }
  return items;
}

// ---------------------------------------------------------------------------
// Printing: relaxed Extended JSON (readable), except that int64 is written
// as {"$numberLong": ..} so that every number keeps its BSON type when the
// file is parsed again. Short values stay on one line.

constexpr size_t kLineWidth = 100;

// libbson writes `{ "$date" : "..." }`; the golden files write
// `{"$date": "..."}` like the rest of them (strings are left alone).
std::string Tighten(const std::string& json) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < json.size()) out += json[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == ' ' && (i + 1 == json.size() || json[i + 1] == '}' || json[i + 1] == ']' ||
                     json[i + 1] == ':' || json[i + 1] == ',' || out.empty() ||
                     out.back() == '{' || out.back() == '['))
      continue;
    out += c;
  }
  return out;
}

std::string RelaxedValue(const bson_iter_t& iter) {
  Doc one;
  AppendValue(one.mut(), "v", iter);
  std::string json = one.ToRelaxedJson();  // { "v" : <value> }
  const std::string prefix = "{ \"v\" : ";
  return Tighten(json.substr(prefix.size(), json.size() - prefix.size() - 2));
}

std::string QuotedKey(std::string_view key) {
  Doc one;
  bson_append_null(one.mut(), key.data(), static_cast<int>(key.size()));
  std::string json = one.ToRelaxedJson();  // { "<key>" : null }
  return json.substr(2, json.size() - 2 - std::string(" : null }").size());
}

std::string Pretty(const bson_t* doc, bool is_array, size_t indent);
std::string OneLine(const bson_t* doc, bool is_array);

// The document or array under `iter`, read in place.
bool Child(const bson_iter_t& iter, bson_t* child, bool* is_array) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&iter) && !BSON_ITER_HOLDS_ARRAY(&iter)) return false;
  uint32_t length = 0;
  const uint8_t* data = nullptr;
  *is_array = BSON_ITER_HOLDS_ARRAY(&iter);
  if (*is_array) bson_iter_array(&iter, &length, &data);
  else bson_iter_document(&iter, &length, &data);
  return bson_init_static(child, data, length);
}

std::string ScalarValue(const bson_iter_t& iter) {
  if (BSON_ITER_HOLDS_INT64(&iter))
    return "{\"$numberLong\": \"" + std::to_string(bson_iter_int64(&iter)) + "\"}";
  return RelaxedValue(iter);
}

std::string PrettyValue(const bson_iter_t& iter, size_t indent) {
  bson_t child;
  bool is_array = false;
  if (Child(iter, &child, &is_array)) return Pretty(&child, is_array, indent);
  return ScalarValue(iter);
}

std::string OneLineValue(const bson_iter_t& iter) {
  bson_t child;
  bool is_array = false;
  if (Child(iter, &child, &is_array)) return OneLine(&child, is_array);
  return ScalarValue(iter);
}

std::string Key(const bson_iter_t& it, bool is_array) {
  return is_array ? "" : QuotedKey(bson_iter_key(&it)) + ": ";
}

// The whole value on one line (what Pretty prints when it fits).
std::string OneLine(const bson_t* doc, bool is_array) {
  std::string out = is_array ? "[" : "{";
  bson_iter_t it;
  bson_iter_init(&it, doc);
  bool first = true;
  while (bson_iter_next(&it)) {
    out += (first ? "" : ", ") + Key(it, is_array) + OneLineValue(it);
    first = false;
  }
  return out + (is_array ? "]" : "}");
}

std::string Pretty(const bson_t* doc, bool is_array, size_t indent) {
  std::string one_line = OneLine(doc, is_array);
  if (indent + one_line.size() <= kLineWidth && one_line.find('\n') == std::string::npos)
    return one_line;
  std::vector<std::string> wide;
  bson_iter_t it;
  bson_iter_init(&it, doc);
  while (bson_iter_next(&it)) wide.push_back(Key(it, is_array) + PrettyValue(it, indent + 2));
  const char* open = is_array ? "[" : "{";
  const char* close = is_array ? "]" : "}";
  if (wide.empty()) return std::string(open) + close;
  std::string out = std::string(open) + "\n";
  for (size_t i = 0; i < wide.size(); ++i)
    out += std::string(indent + 2, ' ') + wide[i] + (i + 1 < wide.size() ? ",\n" : "\n");
  return out + std::string(indent, ' ') + close;
}

std::string PrettyDoc(const Doc& doc) { return Pretty(doc.get(), false, 0) + "\n"; }

std::string PrettyArray(const std::vector<Doc>& docs) {
  if (docs.empty()) return "[]\n";
  std::string out = "[\n";
  for (size_t i = 0; i < docs.size(); ++i)
    out += "  " + Pretty(docs[i].get(), false, 2) + (i + 1 < docs.size() ? ",\n" : "\n");
  return out + "]\n";
}

Doc AsArrayDoc(const std::vector<Doc>& docs) {
  Doc out;
  for (size_t i = 0; i < docs.size(); ++i)
    BSON_APPEND_DOCUMENT(out.mut(), std::to_string(i).c_str(), docs[i].get());
  return out;
}

// ---------------------------------------------------------------------------
// The plan as golden files show it.

// The plan's commands and the proxy's killCursors, as golden files show
// them (rewrite/plan.h: FoldedCommand, KillCursorsCommand).
Doc Display(const BackendCommand& command) { return FoldedCommand(command); }

Doc KillCommand(const ShapedReply& shaped) { return KillCursorsCommand(shaped).body; }

// ---------------------------------------------------------------------------
// Cases

const std::set<std::string> kCaseFiles = {
    "rule.yaml",  "rules",      "command.json", "capabilities.json", "commands.json",
    "replies.json", "reply.json", "kill.json",  "forward",           "notes.md"};

std::optional<Capabilities> LoadCapabilities(const fs::path& path, std::string* error) {
  Capabilities caps;
  if (!fs::exists(path)) return caps;
  std::optional<Doc> doc = ParseJsonFile(path, error);
  if (!doc) return std::nullopt;
  bson_iter_t it;
  bson_iter_init(&it, doc->get());
  while (bson_iter_next(&it)) {
    std::string key = bson_iter_key(&it);
    int32_t* target = key == "max_write_batch_size"     ? &caps.max_write_batch_size
                      : key == "max_bson_object_size"   ? &caps.max_bson_object_size
                      : key == "max_message_size_bytes" ? &caps.max_message_size_bytes
                      : key == "max_wire_version"       ? &caps.max_wire_version
                                                        : nullptr;
    if (!target || !BSON_ITER_HOLDS_INT32(&it)) {
      *error = path.string() + ": unknown key or not an int32: '" + key +
               "' (expected max_write_batch_size, max_bson_object_size, "
               "max_message_size_bytes, max_wire_version)";
      return std::nullopt;
    }
    *target = bson_iter_int32(&it);
  }
  return caps;
}

std::shared_ptr<const RuleSet> LoadRules(const fs::path& dir, std::string* error) {
  RuleLoadResult result;
  if (fs::exists(dir / "rule.yaml")) {
    if (fs::exists(dir / "rules")) {
      *error = "give either rule.yaml or rules/, not both";
      return nullptr;
    }
    result = LoadRuleText(ReadFile(dir / "rule.yaml"), (dir / "rule.yaml").string());
  } else if (fs::is_directory(dir / "rules")) {
    result = LoadRuleDirectory((dir / "rules").string());
  } else {
    *error = "a case needs rule.yaml or a rules/ directory";
    return nullptr;
  }
  for (const auto& e : result.errors) *error += e + "\n";
  return result.rules;
}

// Compares `actual` with the document in `path` (or rewrites the file).
void ExpectDocFile(const fs::path& path, const Doc& actual, const std::string& pretty) {
  if (UpdateMode()) {
    // Say which expected files changed: each one needs a review.
    std::string error;
    std::optional<Doc> before = fs::exists(path) ? ParseJsonFile(path, &error) : std::nullopt;
    if (!before || !(*before == actual)) std::cout << "golden: rewrote " << path.string() << "\n";
    WriteFile(path, pretty);
    return;
  }
  if (!fs::exists(path)) {
    ADD_FAILURE() << path.filename().string() << " is missing; actual:\n" << pretty;
    return;
  }
  std::string error;
  std::optional<Doc> expected = ParseJsonFile(path, &error);
  if (!expected) {
    ADD_FAILURE() << error;
    return;
  }
  EXPECT_TRUE(*expected == actual) << path.filename().string() << " differs\n"
                                   << "expected (canonical): " << expected->ToCanonicalJson()
                                   << "\n  actual (canonical): " << actual.ToCanonicalJson()
                                   << "\n  actual (as a golden file would hold it):\n"
                                   << pretty;
}

// The file must not exist (or, updating, is removed).
void ExpectNoFile(const fs::path& path, const std::string& why) {
  if (!fs::exists(path)) return;
  if (UpdateMode()) {
    std::cout << "golden: removed " << path.string() << "\n";
    fs::remove(path);
    return;
  }
  ADD_FAILURE() << path.filename().string() << " exists, but " << why;
}

class GoldenTest : public testing::TestWithParam<CaseName> {};

TEST_P(GoldenTest, Case) {
  const fs::path dir = GetParam().dir;
  SCOPED_TRACE("case " + dir.string());

  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    EXPECT_TRUE(kCaseFiles.count(file)) << "unexpected file '" << file << "' in the case";
  }

  std::string error;
  std::shared_ptr<const RuleSet> rules = LoadRules(dir, &error);
  ASSERT_TRUE(rules) << "rules do not load:\n" << error;

  ASSERT_TRUE(fs::exists(dir / "command.json")) << "command.json is missing";
  std::optional<Doc> body = ParseJsonFile(dir / "command.json", &error);
  ASSERT_TRUE(body && !body->empty()) << error;
  std::optional<Command> parsed = CommandFromDocument(*body);
  ASSERT_TRUE(parsed) << "command.json needs \"$db\"";
  const Command& command = *parsed;

  std::optional<Capabilities> caps = LoadCapabilities(dir / "capabilities.json", &error);
  ASSERT_TRUE(caps) << error;

  std::optional<Plan> plan = Rewrite(command, *rules, *caps);

  // Forwarded unchanged.
  if (!plan) {
    if (UpdateMode()) {
      if (!fs::exists(dir / "forward"))
        std::cout << "golden: wrote " << (dir / "forward").string() << "\n";
      WriteFile(dir / "forward", "");
    } else {
      EXPECT_TRUE(fs::exists(dir / "forward"))
          << "Rewrite returned nullopt (forward unchanged), but the case has no 'forward' file";
    }
    for (const char* f : {"commands.json", "reply.json", "kill.json"})
      ExpectNoFile(dir / f, "the command is forwarded unchanged");
    EXPECT_FALSE(fs::exists(dir / "replies.json")) << "replies.json given for a forwarded command";
    return;
  }
  ExpectNoFile(dir / "forward", "Rewrite returned a plan");
  EXPECT_FALSE(plan->rule.empty()) << "the plan names no rule";

  // Answered by remold itself.
  if (plan->immediate_reply) {
    EXPECT_TRUE(plan->ensure.empty() && plan->commands.empty())
        << "an immediate reply with backend commands";
    ExpectNoFile(dir / "commands.json", "remold answers by itself (no backend commands)");
    ExpectNoFile(dir / "kill.json", "remold answers by itself");
    EXPECT_FALSE(fs::exists(dir / "replies.json")) << "replies.json given, but remold answers itself";
    ExpectDocFile(dir / "reply.json", *plan->immediate_reply, PrettyDoc(*plan->immediate_reply));
    return;
  }

  // Backend commands: ensure first, then commands, then the steps plan.then
  // returns for the replies before them, run by the proxy's own PlanRunner.
  const std::vector<BackendCommand> ensure = plan->ensure;
  const bool continues = static_cast<bool>(plan->then);
  EXPECT_TRUE(static_cast<bool>(plan->shape)) << "a plan with backend commands but no shape";
  PlanRunner runner(std::move(*plan));
  auto expect_commands = [&] {
    std::vector<Doc> shown;
    for (const auto& c : ensure) shown.push_back(Display(c));
    for (const auto& c : runner.commands()) shown.push_back(Display(c));
    ExpectDocFile(dir / "commands.json", AsArrayDoc(shown), PrettyArray(shown));
  };

  if (!fs::exists(dir / "replies.json")) {
    EXPECT_FALSE(continues) << "this plan continues after its first replies: give replies.json";
    expect_commands();
    ExpectNoFile(dir / "reply.json", "there is no replies.json to shape a reply from");
    ExpectNoFile(dir / "kill.json", "there is no replies.json to shape a reply from");
    return;
  }
  std::optional<Doc> replies_doc = ParseJsonFile(dir / "replies.json", &error);
  ASSERT_TRUE(replies_doc) << error;
  std::vector<Doc> replies = ArrayItems(*replies_doc);

  for (size_t i = 0; i < replies.size(); ++i) {
    const BackendCommand* next = runner.Next();
    ASSERT_TRUE(next != nullptr)
        << (i < runner.commands().size()
                ? "replies.json has a reply for command " + std::to_string(i + 1) +
                      ", which the proxy would not run (execution stopped before it)"
                : std::string("replies.json has more replies than the plan has commands"));
    runner.Accept(replies[i]);
  }
  const bool more = runner.Next() != nullptr;
  expect_commands();
  ASSERT_FALSE(more) << "replies.json has " << replies.size() << " replies for "
                     << runner.commands().size()
                     << " commands, and nothing stops execution early";

  ShapedReply shaped = runner.Finish();
  ExpectDocFile(dir / "reply.json", shaped.reply, PrettyDoc(shaped.reply));
  if (shaped.cursors_to_kill.empty()) {
    ExpectNoFile(dir / "kill.json", "the shaped reply leaves no cursor to kill");
  } else {
    Doc kill = KillCommand(shaped);
    ExpectDocFile(dir / "kill.json", kill, PrettyDoc(kill));
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, testing::ValuesIn(ListCases(CasesDir())),
                         TestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenTest);

TEST(GoldenCases, DirectoryHoldsCases) {
  EXPECT_GE(ListCases(CasesDir()).size(), 1u) << "no cases under " << CasesDir();
}

}  // namespace
}  // namespace remold
