// remold-reconcile: `remold reconcile`, as its own program (see
// tools/CMakeLists.txt for why). `remold reconcile ARGS` runs it with ARGS.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "tools/reconcile/reconcile.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return remold::RunReconcile(args, std::cout, std::cerr, isatty(STDERR_FILENO));
}
