#include "tools/migrate/migration_request.h"

#include <cstdio>

#include "tools/common/progress.h"

namespace remold {

std::string FormatRate(int64_t count, double seconds) {
  return seconds > 0 ? WithThousands(static_cast<int64_t>(count / seconds)) + "/s" : "-";
}

std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", seconds);
  return text;
}

}  // namespace remold
