// failures: how a bench accounts for failed operations: how many, and the
// first message (the others are usually alike).
//
// Contract:
//   - add() counts one failure and keeps its message if it is the first;
//     merge() adds another account, keeping this one's first message if any.
//   - text("inserts") is "" with no failure, else "3 failed inserts, first:
//     <message>".
#pragma once

#include <cstdint>
#include <string>

namespace bench_common {

struct Failures {
  uint64_t count = 0;
  std::string first;

  void add(const std::string& message) {
    if (count++ == 0) first = message;
  }
  void merge(const Failures& other) {
    count += other.count;
    if (first.empty()) first = other.first;
  }
  std::string text(const char* operations) const {
    if (count == 0) return "";
    return std::to_string(count) + " failed " + operations + ", first: " + first;
  }
};

}  // namespace bench_common
