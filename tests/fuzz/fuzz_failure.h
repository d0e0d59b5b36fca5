// How a fuzz target reports a broken promise: one line on stderr naming it,
// then abort(), so libFuzzer keeps the input as a crash reproducer exactly
// as it does for a sanitizer report.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace remold::fuzz {

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}

inline void Require(bool holds, const char* what) {
  if (!holds) Fail(what);
}

}  // namespace remold::fuzz
