// Process harness for the mongo-c-driver end-to-end suite.
//
// One gtest global Environment starts the servers once for the whole run:
//   - the backend: REMOLD_TEST_BACKEND_URI if set, otherwise the bundled
//     mongo-java-server (tests/backend), which prints `listening HOST:PORT`;
//   - remold in front of it (`remold serve --listen 127.0.0.1:0 ...`), which
//     prints `remold listening on HOST:PORT`.
// Tests connect to Endpoints().server_uri. REMOLD_TEST_NO_PROXY=1 skips the
// proxy and points server_uri at the backend (a debugging aid).
// Teardown sends SIGTERM to remold and fails the run unless it exits 0.
#pragma once

#include <string>

namespace harness {

struct Endpoints {
  std::string server_uri;   // what tests connect to (remold, or the backend)
  std::string backend_uri;  // the backend itself, for direct comparisons
  bool through_proxy = false;
};

// Valid once the global environment has been set up.
const Endpoints& Current();

// False once remold has exited (crash or early exit); true when no proxy runs.
// `why` receives a description of how it ended.
bool ProxyAlive(std::string* why = nullptr);

// Registers the global environment with gtest; call before RUN_ALL_TESTS.
void Install();

}  // namespace harness
