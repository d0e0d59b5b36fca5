// How a rule serves a collection that may hold documents written before it
// (patterns/adoption.h); the rule file's `migrating` key says which.
#pragma once

namespace remold {

enum class Adoption {
  kAuto,    // nothing said: remold counts such documents and decides
  kOff,     // `migrating: false`: the rule's form alone, whatever the count
  kByRule,  // `migrating: true` (or `to_flat`): the rule serves both forms already
};

}  // namespace remold
