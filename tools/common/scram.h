// The client side of SCRAM (RFC 5802; SCRAM-SHA-256: RFC 7677) as MongoDB
// speaks it, for remold's own connections (tools/common/wire_connection.h).
//
// remold does its own SCRAM rather than libmongoc's: libmongoc accepts only
// the salt length mongod uses (the hash size less 4 bytes), and other
// servers, such as DocumentDB, send SCRAM-SHA-256 salts of 16 bytes, which
// the RFC allows (docs/backends.md).
//
// Pure: the conversation's messages in and out; the caller runs saslStart
// and saslContinue. Passwords are taken as they are (no SASLprep): a
// password with characters outside ASCII is refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "proxy/wire/backend_identity.h"

namespace remold {

class ScramConversation {
 public:
  // `mechanism`: kScramSha256 or kScramSha1. `nonce`: the client nonce
  // (printable ASCII, no comma); empty: 24 random bytes in base64.
  ScramConversation(AuthMechanism mechanism, std::string user, std::string password, std::string nonce = "");

  // Set when the password cannot be used (SASLprep would change it).
  const std::string& problem() const { return problem_; }

  // "n,,n=<user>,r=<nonce>": the payload of saslStart.
  std::string ClientFirst() const;
  // The payload of the first saslContinue, from the server's first message;
  // nullopt with `error` set when that message is not one to answer.
  std::optional<std::string> ClientFinal(std::string_view server_first, std::string& error);
  // Whether the server's final message proves it knows the password.
  bool ServerFinalValid(std::string_view server_final, std::string& error) const;

 private:
  AuthMechanism mechanism_;
  std::string user_;
  std::string password_;  // SCRAM-SHA-1: MongoDB's digest of user and password
  std::string nonce_;
  std::string problem_;
  std::string auth_message_;
  std::string server_key_;
};

}  // namespace remold
