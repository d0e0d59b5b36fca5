// What every output of the rewrite engine must be, whatever the command,
// the rule or the backend's replies: checked by the fuzz targets of the
// engine and of the loader. A check that fails ends the process through
// fuzz::Fail (tests/fuzz/fuzz_failure.h), naming what is wrong.
#pragma once

#include "common/doc.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold::fuzz {

// A command remold sends: its body and every document of its sequence are
// valid BSON (proxy/wire/bson_check.h, the check remold applies to what it
// receives), the body names its database in a "$db" string, and the OP_MSG
// the proxy makes of it (proxy/rewrite_bridge.h) parses back.
void CheckBackendCommand(const BackendCommand& command);

// A reply remold gives a client: valid BSON with an "ok" field (unless it
// may come from backend replies that had none: `backend_had_ok` false).
void CheckClientReply(const Doc& reply, bool backend_had_ok = true);

// A reply remold makes up by itself (Plan::immediate_reply) to `command`:
// a client reply, and when it refuses, refused in MongoDB's shape: {ok: 0,
// errmsg, code, codeName} with a code other than 0 and 20
// (common/error_code.h), and each of its writeErrors {index, code, errmsg}
// alike, its index naming one of the command's statements.
void CheckImmediateReply(const Doc& reply, const Command& command);

}  // namespace remold::fuzz
