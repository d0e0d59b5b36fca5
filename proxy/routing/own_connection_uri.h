// The libmongoc URI of a connection remold opens for itself (the topology
// monitor and its start-up counts, `remold check --backend`, `remold
// migrate`, `remold reconcile`): the backend's hosts, connect timeout,
// TLS, directConnection and replicaSet options, the application name the
// server logs, and remold's own identity (proxy/wire/backend_identity.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "proxy/wire/backend_identity.h"
#include "proxy/wire/backend_uri.h"

struct _mongoc_uri_t;

namespace remold {

struct MongocUriDeleter {
  void operator()(_mongoc_uri_t* uri) const;
};
using MongocUriPtr = std::unique_ptr<_mongoc_uri_t, MongocUriDeleter>;

// nullptr with `error` set when libmongoc refuses a value, or when the
// identity cannot work with these options (MONGODB-X509 without TLS, or
// without a certificate).
MongocUriPtr OwnConnectionUri(const BackendOptions& backend, const BackendIdentity& identity,
                              std::string_view app_name, std::string& error);

}  // namespace remold
