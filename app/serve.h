// `remold serve [flags]`: the proxy. Loads the configuration (app/config.h)
// and the rules directory, serves /metrics, /healthz and /readyz when
// --metrics-listen asks for them, and runs the proxy (proxy/server.h) until
// SIGTERM has drained it. SIGHUP reloads the rules and the TLS files.
//
// Prints `remold listening on HOST:PORT` (then the metrics address, if any)
// on stdout once it accepts connections; errors go to stderr.
//
// Exit codes: 0 after the drain, or for --help; 1 an address cannot be
// listened on; 2 configuration, rules or TLS files rejected.
#pragma once

#include <string>
#include <vector>

namespace remold {

int RunServe(const std::vector<std::string>& args);

}  // namespace remold
