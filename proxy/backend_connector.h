// Opens a TCP connection to the backend: the URI's hosts in order, the first
// that answers within the connect timeout wins.
#pragma once

#include <optional>

#include "proxy/asio.h"
#include "proxy/backend_uri.h"

namespace remold {

awaitable<std::optional<tcp::socket>> ConnectBackend(const BackendOptions& options);

}  // namespace remold
