// remold: a MongoDB wire-protocol proxy that applies schema design patterns.
//
//   remold serve [flags]   run the proxy (see `remold serve --help`)
//   remold check DIR       validate rule files (--backend URI: count data written before them)
//   remold explain ...     dry-run the rewrite of one command
//   remold reconcile ...   recompute computed rules' values, report drift, fix
//   remold migrate ...     move a rule's existing documents into its form, or back
//   remold --version
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "app/explain.h"
#include "app/serve.h"
#include "tools/migrate/migrate.h"

namespace {

constexpr const char* kVersion = "0.1.0";

// `remold reconcile ARGS`: replaces this process with remold-reconcile
// ARGS, found next to this executable.
int RunReconcileProgram(const char* argv0, const std::vector<std::string>& args) {
  std::string self(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  self.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (self.empty()) self = argv0;
  std::string program = self.substr(0, self.rfind('/') + 1) + "remold-reconcile";
  std::vector<char*> argv;
  argv.push_back(program.data());
  std::vector<std::string> copies(args);
  for (std::string& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(program.c_str(), argv.data());
  std::cerr << "remold: cannot run " << program << ": " << std::strerror(errno)
            << " (remold-reconcile is installed next to remold)\n";
  return 2;
}

constexpr const char* kUsage =
    "remold: a MongoDB wire-protocol proxy that applies schema design patterns\n"
    "\n"
    "usage:\n"
    "  remold serve [flags]   run the proxy; `remold serve --help` lists the flags\n"
    "  remold check DIR       validate a rules directory (exit 1 on any error);\n"
    "                         with --backend URI, also count the documents written before each\n"
    "                         rule that are not in its form (exit 1 when there are any)\n"
    "  remold explain --rules DIR [--db DB] '<command as Extended JSON>'\n"
    "                         print the backend commands remold would send (dry run)\n"
    "  remold reconcile --config FILE [--rule NAME] [--fix]\n"
    "                         recompute the values and copies rules maintain from the source\n"
    "                         data, report drift (exit 1), repair it with --fix\n"
    "  remold migrate --config FILE --rule NAME [--to flat] [--dry-run] [--batch N] [--max-rate N]\n"
    "                         bring the data written before a rule into its form (documents\n"
    "                         converted, readings moved into buckets, values filled), or\n"
    "                         back; online, resumable; exit 1 while any are left\n"
    "  remold --version       print the version\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "remold " << kVersion << "\n";
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "serve") return remold::RunServe(rest);
  if (args[0] == "check") return remold::RunCheck(rest, std::cout, std::cerr);
  if (args[0] == "explain") return remold::RunExplain(rest, std::cout, std::cerr);
  if (args[0] == "reconcile") return RunReconcileProgram(argv[0], rest);
  if (args[0] == "migrate") return remold::RunMigrate(rest, std::cout, std::cerr, isatty(STDERR_FILENO));
  std::cerr << "remold: unknown command '" << args[0] << "'\n" << kUsage;
  return 2;
}
