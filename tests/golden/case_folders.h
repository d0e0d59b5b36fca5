// What both data-driven runners (golden_test.cc: rewrite cases,
// loader_cases_test.cc: loader cases) share: case folders laid out as
// <root>/<pattern>/<case>/, their files, and update mode
// (REMOLD_GOLDEN_UPDATE=1 rewrites the expected files from the actual
// output, for review).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace remold::golden {

inline bool UpdateMode() {
  const char* v = std::getenv("REMOLD_GOLDEN_UPDATE");
  return v && *v && std::string(v) != "0";
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

struct CaseName {
  std::string pattern;
  std::string name;
  std::filesystem::path dir;
};

// gtest prints the parameter of a failing case with this.
inline void PrintTo(const CaseName& c, std::ostream* os) { *os << c.pattern << "/" << c.name; }

// Every <root>/<pattern>/<case>/ folder, in path order.
inline std::vector<CaseName> ListCases(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<CaseName> cases;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return cases;
  for (const auto& pattern : fs::directory_iterator(root, ec)) {
    if (!pattern.is_directory()) continue;
    for (const auto& dir : fs::directory_iterator(pattern.path(), ec)) {
      if (!dir.is_directory()) continue;
      cases.push_back({pattern.path().filename().string(), dir.path().filename().string(),
                       dir.path()});
    }
  }
  std::sort(cases.begin(), cases.end(),
            [](const CaseName& a, const CaseName& b) { return a.dir < b.dir; });
  return cases;
}

// "<pattern>__<case>", as a gtest name.
inline std::string TestName(const testing::TestParamInfo<CaseName>& info) {
  std::string name = info.param.pattern + "__" + info.param.name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace remold::golden
