// Data-driven cases of the rule loader (ruleset/loader.h): one test per folder
// loader/<pattern>/<case>/ (see README.md, "Loader cases").
//
// A case's rule files are either
//   rule.yaml  loaded twice, with LoadRuleText(text, "rule.yaml") and as the
//              only rule file of a directory (the case folder itself, through
//              LoadRuleDirectory); both loads must give the expected outcome;
//   rules/     a rules directory, loaded with LoadRuleDirectory.
// The expected outcome is either
//   errors.txt  the error lines, exactly and in order; no RuleSet at all;
//   loaded.txt  no error; one line per rule of the RuleSet, in its order:
//               SOURCE NAME NAMESPACE PATTERN.
// Paths in the outcome are written relative to the case folder (rule.yaml,
// rules/a.yaml), so cases do not depend on where the tree is checked out.
//
// REMOLD_GOLDEN_UPDATE=1 writes the expected file from the actual outcome.
// Review every rewritten file by hand before keeping it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ruleset/loader.h"
#include "tests/golden/case_folders.h"

#ifndef REMOLD_LOADER_CASES_DIR
#error "REMOLD_LOADER_CASES_DIR must name the loader cases directory"
#endif

namespace remold {
namespace {

namespace fs = std::filesystem;
using namespace golden;  // tests/golden/case_folders.h

std::string CasesDir() {
  if (const char* dir = std::getenv("REMOLD_LOADER_CASES_DIR")) return dir;
  return REMOLD_LOADER_CASES_DIR;
}

std::vector<std::string> ReadLines(const fs::path& path) {
  std::vector<std::string> lines;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

// ---------------------------------------------------------------------------
// The outcome of a load, as the expected files hold it.

// `text` with every "<case folder>/" removed.
std::string Relative(std::string text, const fs::path& dir) {
  const std::string prefix = dir.string() + "/";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at))
    text.erase(at, prefix.size());
  return text;
}

struct Outcome {
  bool loaded = false;             // a RuleSet and no error
  std::vector<std::string> lines;  // the errors, or one line per rule
};

Outcome Describe(const RuleLoadResult& result, const fs::path& dir) {
  Outcome outcome;
  if (!result.errors.empty()) {
    EXPECT_EQ(result.rules, nullptr) << "a load with errors must yield no RuleSet";
    for (const auto& e : result.errors) outcome.lines.push_back(Relative(e, dir));
    return outcome;
  }
  if (!result.rules) {
    ADD_FAILURE() << "no RuleSet and no error";
    return outcome;
  }
  outcome.loaded = true;
  for (const Rule& rule : result.rules->rules()) {
    const Namespace& ns = rule.logical();
    EXPECT_EQ(result.rules->Find(ns.db, ns.collection), &rule)
        << "the RuleSet does not find the rule of " << ns.full() << " by its namespace";
    outcome.lines.push_back(Relative(rule.source, dir) + " " + rule.name + " " + ns.full() + " " +
                            std::string(rule.pattern_name()));
  }
  return outcome;
}

// ---------------------------------------------------------------------------
// Cases

const std::set<std::string> kCaseFiles = {"rule.yaml", "rules", "errors.txt", "loaded.txt",
                                          "notes.md"};

// Loads the case's rules; both loads of a rule.yaml must agree.
Outcome Load(const fs::path& dir) {
  if (fs::exists(dir / "rule.yaml")) {
    EXPECT_FALSE(fs::exists(dir / "rules")) << "give either rule.yaml or rules/, not both";
    Outcome text = Describe(LoadRuleText(ReadFile(dir / "rule.yaml"), "rule.yaml"), dir);
    Outcome directory = Describe(LoadRuleDirectory(dir.string()), dir);
    EXPECT_EQ(Joined(directory.lines), Joined(text.lines))
        << "LoadRuleDirectory of the case folder and LoadRuleText of rule.yaml disagree";
    return text;
  }
  EXPECT_TRUE(fs::is_directory(dir / "rules")) << "a case needs rule.yaml or a rules/ directory";
  return Describe(LoadRuleDirectory((dir / "rules").string()), dir);
}

class LoaderCaseTest : public testing::TestWithParam<CaseName> {};

TEST_P(LoaderCaseTest, Case) {
  const fs::path dir = GetParam().dir;
  SCOPED_TRACE("case " + dir.string());

  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string file = entry.path().filename().string();
    EXPECT_TRUE(kCaseFiles.count(file)) << "unexpected file '" << file << "' in the case";
  }
  EXPECT_FALSE(fs::exists(dir / "errors.txt") && fs::exists(dir / "loaded.txt"))
      << "give either errors.txt or loaded.txt, not both";

  Outcome actual = Load(dir);
  const fs::path expected_file = dir / (actual.loaded ? "loaded.txt" : "errors.txt");
  const fs::path other_file = dir / (actual.loaded ? "errors.txt" : "loaded.txt");
  const std::string actual_text = Joined(actual.lines);

  if (UpdateMode()) {
    if (!fs::exists(expected_file) || ReadFile(expected_file) != actual_text) {
      std::ofstream(expected_file, std::ios::binary | std::ios::trunc) << actual_text;
      std::cout << "golden: rewrote " << expected_file.string() << "\n";
    }
    if (fs::remove(other_file, ec)) std::cout << "golden: removed " << other_file.string() << "\n";
    return;
  }

  ASSERT_TRUE(fs::exists(expected_file))
      << (actual.loaded ? "the rules load, but the case has no loaded.txt"
                        : "the rules do not load, but the case has no errors.txt")
      << "; actual " << expected_file.filename().string() << ":\n"
      << actual_text;
  EXPECT_EQ(Joined(ReadLines(expected_file)), actual_text)
      << expected_file.filename().string() << " differs; actual, as the file would hold it:\n"
      << actual_text;
}

INSTANTIATE_TEST_SUITE_P(Loader, LoaderCaseTest, testing::ValuesIn(ListCases(CasesDir())),
                         TestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LoaderCaseTest);

TEST(LoaderCases, DirectoryHoldsCases) {
  EXPECT_GE(ListCases(CasesDir()).size(), 1u) << "no cases under " << CasesDir();
}

}  // namespace
}  // namespace remold
