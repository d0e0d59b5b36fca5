// A whole SCRAM login (saslStart, then saslContinue until done) over any
// connection that runs one command at a time: remold's own connections
// (tools/common/wire_connection.h) and the benches' raw wire clients.
//
// The conversation itself is tools/common/scram.h's; this runs it. `run`
// sends `command` to database `db` (adding $db is its job) and returns the
// reply, or throws whatever its link throws. The result is empty when the
// server accepted the login and proved it knows the password.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/doc.h"
#include "proxy/wire/backend_identity.h"

namespace remold {

struct LoginFailure {
  std::string why;   // the server's errmsg (and code), or what was wrong with its answer
  int32_t code = 0;  // the server's code, 0 when the failure is the client's finding
};

using CommandRunner = std::function<Doc(const std::string& db, const Doc& command)>;

// `mechanism`: kScramSha256 or kScramSha1; `source`: the authentication database.
std::optional<LoginFailure> ScramLogin(const CommandRunner& run, AuthMechanism mechanism, const std::string& user,
                                       const std::string& password, const std::string& source);

}  // namespace remold
