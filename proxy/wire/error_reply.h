// Error replies in MongoDB's shape: {ok: 0, errmsg, code, codeName}.
//
// The reply uses the request's own protocol (OP_MSG or OP_REPLY for a
// legacy OP_QUERY) and answers its requestID, so any driver reads it as it
// would read an error from mongod.
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/wire/wire_error.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {

std::vector<uint8_t> ErrorDocument(const WireError& error);

// `request_op_code` is the opcode of the (decompressed) request.
std::vector<uint8_t> EncodeErrorReply(const WireError& error, int32_t request_id,
                                      int32_t request_op_code, int32_t reply_request_id);

}  // namespace remold::wire
