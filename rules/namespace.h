// Namespace: "database.collection", as rules and commands name collections.
#pragma once

#include <string>

namespace remold {

struct Namespace {
  std::string db;
  std::string collection;

  std::string full() const { return db + "." + collection; }
  bool operator==(const Namespace&) const = default;
};

}  // namespace remold
