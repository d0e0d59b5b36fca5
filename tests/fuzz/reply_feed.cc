#include "tests/fuzz/reply_feed.h"

#include <bson/bson.h>

#include <cstdio>
#include <string>

namespace remold::fuzz {

Doc ReplyFeed::Next(const BackendCommand& command) {
  Show("command", FoldedCommand(command));
  Doc reply = next_ < given_.size() ? given_[next_++] : Default(command);
  Show("reply", reply);
  all_had_ok_ = all_had_ok_ && Find(reply.get(), "ok").has_value();
  return reply;
}

void ReplyFeed::Show(const char* what, const Doc& doc) const {
  if (show_) std::fprintf(stderr, "%s: %s\n", what, doc.ToRelaxedJson().c_str());
}

Doc ReplyFeed::Default(const BackendCommand& command) const {
  std::string ns = FindString(command.body.get(), "$db").value_or("db");
  bson_iter_t first;
  if (bson_iter_init(&first, command.body.get()) && bson_iter_next(&first) &&
      BSON_ITER_HOLDS_UTF8(&first))
    ns += "." + std::string(bson_iter_utf8(&first, nullptr));
  Doc reply;
  BSON_APPEND_DOUBLE(reply.mut(), "ok", 1.0);
  BSON_APPEND_INT32(reply.mut(), "n", 0);
  BSON_APPEND_INT32(reply.mut(), "nModified", 0);
  bson_t cursor, batch;
  BSON_APPEND_DOCUMENT_BEGIN(reply.mut(), "cursor", &cursor);
  BSON_APPEND_INT64(&cursor, "id", 0);
  AppendString(&cursor, "ns", ns);
  BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &batch);
  bson_append_array_end(&cursor, &batch);
  bson_append_document_end(reply.mut(), &cursor);
  return reply;
}

}  // namespace remold::fuzz
