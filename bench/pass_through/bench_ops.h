// The operations the benchmark times, and the collection they read.
//
// Contract: every op is one command round trip on a WireClient. run_op()
// returns an empty string when the reply is what the op expects (ok: 1, and
// for find_by_id exactly one document) and an error description otherwise;
// socket and framing failures propagate as WireError. seed_collection()
// (re)creates bench.c with documents _id 0..count-1 through the given client.
#pragma once

#include "wire_client.h"

#include <cstdint>
#include <optional>
#include <string>

namespace remold_bench {

enum class OpKind { ping, find_by_id };

// "ping" or "find_by_id"; std::nullopt for anything else.
std::optional<OpKind> parse_op(const std::string& name);
const char* op_name(OpKind op);

// One timed operation; `id` is the _id to look up (ignored by ping).
std::string run_op(WireClient& client, OpKind op, int32_t id);

// The connection handshake a driver would send first (isMaster), then the
// login with SCRAM-SHA-256 when the bench has credentials
// (bench_common::bench_credentials()); throws WireError when the server
// does not answer ok: 1 or refuses the login.
void handshake(WireClient& client);

// Drops bench.c and inserts `count` documents in batches; throws WireError
// when a command fails or the final count is not `count`.
void seed_collection(WireClient& client, int32_t count);

}  // namespace remold_bench
