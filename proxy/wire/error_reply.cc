#include "proxy/wire/error_reply.h"

#include <bson/bson.h>

#include "common/utf8.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"

namespace remold::wire {

std::vector<uint8_t> ErrorDocument(const WireError& error) {
  bson_t doc = BSON_INITIALIZER;
  BSON_APPEND_DOUBLE(&doc, "ok", 0.0);
  const std::string message = ValidUtf8(error.message);
  bson_append_utf8(&doc, "errmsg", -1, message.data(), static_cast<int>(message.size()));
  BSON_APPEND_INT32(&doc, "code", error.code.value);
  bson_append_utf8(&doc, "codeName", -1, error.code.name.data(),
                   static_cast<int>(error.code.name.size()));
  const uint8_t* data = bson_get_data(&doc);
  std::vector<uint8_t> bytes(data, data + doc.len);
  bson_destroy(&doc);
  return bytes;
}

std::vector<uint8_t> EncodeErrorReply(const WireError& error, int32_t request_id,
                                      int32_t request_op_code, int32_t reply_request_id) {
  std::vector<uint8_t> doc = ErrorDocument(error);
  if (request_op_code == static_cast<int32_t>(OpCode::kQuery)) {
    OpReplyView reply;
    reply.documents.push_back(doc);
    return EncodeOpReply(reply_request_id, request_id, reply);
  }
  return EncodeOpMsg(reply_request_id, request_id, 0, doc);
}

}  // namespace remold::wire
