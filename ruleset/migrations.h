// The migration part (patterns/migration.h) of every pattern that has one:
// `remold migrate` includes this one header.
#pragma once

#include "patterns/adoption.h"
#include "patterns/attribute/migration.h"
#include "patterns/bucket/migration.h"
#include "patterns/computed/migration.h"
#include "patterns/history/migration.h"
#include "patterns/migration.h"
#include "patterns/outlier/migration.h"
#include "patterns/polymorphic/migration.h"
#include "patterns/versioned/migration.h"
#include "ruleset/patterns.h"

namespace remold {

// `layer` as it serves while documents written before it may remain
// (patterns/adoption.h): its pattern's WhileUnconverted when the rule file
// left that to remold, else as it is.
inline PatternRule WhileUnconvertedLayer(const PatternRule& layer) {
  return std::visit(
      [&]<typename R>(const R& pattern) -> PatternRule {
        if constexpr (AdoptingRule<R>)
          if (AdoptionOf(pattern) == Adoption::kAuto) return WhileUnconverted(pattern);
        return pattern;
      },
      layer);
}

}  // namespace remold
