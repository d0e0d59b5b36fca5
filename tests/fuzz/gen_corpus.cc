// Writes the seed corpus of fuzz_codec: one valid message per file, covering
// every path DecodeRequest takes, plus two backend handshake replies.
//   gen_corpus DIR
#include <bson/bson.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "proxy/wire/byte_io.h"
#include "proxy/wire/compression.h"
#include "proxy/wire/op_compressed.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "proxy/wire/wire_format.h"

namespace {

using namespace remold::wire;
using Bytes = std::vector<uint8_t>;

Bytes Doc(bson_t* doc) {
  const uint8_t* data = bson_get_data(doc);
  Bytes bytes(data, data + doc->len);
  bson_destroy(doc);
  return bytes;
}

void Int32(Bytes& out, int32_t v) {
  uint8_t b[4];
  StoreInt32(b, v);
  out.insert(out.end(), b, b + 4);
}

Bytes Header(int32_t request_id, OpCode op) {
  Bytes out;
  Int32(out, 0);
  Int32(out, request_id);
  Int32(out, 0);
  Int32(out, static_cast<int32_t>(op));
  return out;
}

void Finish(Bytes& m) { StoreInt32(m.data(), static_cast<int32_t>(m.size())); }

Bytes InsertWithSequence() {
  Bytes m = Header(3, OpCode::kMsg);
  Int32(m, 0);
  m.push_back(0);
  Bytes body = Doc(BCON_NEW("insert", "coll", "ordered", BCON_BOOL(true), "$db", "test"));
  m.insert(m.end(), body.begin(), body.end());
  std::vector<Bytes> docs = {Doc(BCON_NEW("_id", BCON_INT32(1), "v", "one")),
                             Doc(BCON_NEW("_id", BCON_INT32(2), "v", "{", "n", BCON_DOUBLE(2.5), "}"))};
  std::string id = "documents";
  int32_t size = 4 + static_cast<int32_t>(id.size()) + 1;
  for (const Bytes& d : docs) size += static_cast<int32_t>(d.size());
  m.push_back(1);
  Int32(m, size);
  m.insert(m.end(), id.begin(), id.end());
  m.push_back(0);
  for (const Bytes& d : docs) m.insert(m.end(), d.begin(), d.end());
  Finish(m);
  return m;
}

Bytes OpQuery(int32_t request_id, const char* collection, const Bytes& query) {
  Bytes m = Header(request_id, OpCode::kQuery);
  Int32(m, 0);
  m.insert(m.end(), collection, collection + strlen(collection) + 1);
  Int32(m, 0);
  Int32(m, -1);
  m.insert(m.end(), query.begin(), query.end());
  Finish(m);
  return m;
}

Bytes ReplicaSetHello() {
  return Doc(BCON_NEW("hosts", "[", "a:27017", "b:27017", "]", "setName", "rs0", "primary", "a:27017",
                      "me", "a:27017", "isWritablePrimary", BCON_BOOL(true), "topologyVersion", "{",
                      "counter", BCON_INT64(1), "}", "maxMessageSizeBytes", BCON_INT32(48000000),
                      "maxWireVersion", BCON_INT32(17), "logicalSessionTimeoutMinutes",
                      BCON_INT32(30), "compression", "[", "zstd", "]", "ok", BCON_DOUBLE(1)));
}

void Write(const std::string& dir, const std::string& name, const Bytes& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];

  Bytes ping = EncodeOpMsg(1, 0, 0, Doc(BCON_NEW("ping", BCON_INT32(1), "$db", "admin")));
  Bytes find = EncodeOpMsg(
      2, 0, 0,
      Doc(BCON_NEW("find", "coll", "filter", "{", "x", "{", "$gt", BCON_INT32(5), "}", "}", "limit",
                   BCON_INT64(10), "lsid", "{", "id", BCON_BIN(BSON_SUBTYPE_UUID, (const uint8_t*)"0123456789abcdef", 16), "}",
                   "$db", "test")));
  Write(dir, "op_msg_ping", ping);
  Write(dir, "op_msg_insert_kind1", InsertWithSequence());
  Write(dir, "op_msg_checksum",
        EncodeOpMsg(4, 0, 0, Doc(BCON_NEW("find", "coll", "$db", "test")), /*with_checksum=*/true));
  Write(dir, "op_msg_more_to_come",
        EncodeOpMsg(5, 0, msg_flags::kMoreToCome,
                    Doc(BCON_NEW("delete", "coll", "deletes", "[", "{", "q", "{", "}", "limit",
                                 BCON_INT32(0), "}", "]", "writeConcern", "{", "w", BCON_INT32(0),
                                 "}", "$db", "test"))));
  Write(dir, "op_msg_hello_exhaust",
        EncodeOpMsg(6, 0, msg_flags::kExhaustAllowed,
                    Doc(BCON_NEW("hello", BCON_INT32(1), "topologyVersion", "{", "counter",
                                 BCON_INT64(0), "}", "maxAwaitTimeMS", BCON_INT32(10000),
                                 "compression", "[", "zstd", "snappy", "zlib", "]", "$db", "admin"))));
  Write(dir, "op_query_ismaster",
        OpQuery(7, "admin.$cmd",
                Doc(BCON_NEW("isMaster", BCON_INT32(1), "helloOk", BCON_BOOL(true), "compression",
                             "[", "snappy", "zlib", "zstd", "]", "client", "{", "driver", "{",
                             "name", "fuzz", "version", "1", "}", "}"))));
  Write(dir, "op_query_ismaster_wrapped",
        OpQuery(8, "admin.$cmd",
                Doc(BCON_NEW("$query", "{", "ismaster", BCON_INT32(1), "}", "$readPreference", "{",
                             "mode", "primaryPreferred", "}"))));
  Write(dir, "op_query_collection", OpQuery(9, "test.coll", Doc(BCON_NEW("x", BCON_INT32(1)))));
  for (Compressor c : {Compressor::kNoop, Compressor::kSnappy, Compressor::kZlib, Compressor::kZstd})
    Write(dir, "op_compressed_" + std::string(CompressorName(c)), CompressMessage(find, c));
  Write(dir, "op_compressed_zlib_op_query",
        CompressMessage(OpQuery(10, "admin.$cmd", Doc(BCON_NEW("isMaster", BCON_INT32(1)))),
                        Compressor::kZlib));

  // Backend replies, for the handshake rewrite of OP_MSG and OP_REPLY.
  Write(dir, "reply_op_msg_hello", EncodeOpMsg(11, 6, msg_flags::kMoreToCome, ReplicaSetHello()));
  OpReplyView reply;
  Bytes hello = ReplicaSetHello();
  reply.documents.push_back(hello);
  Write(dir, "reply_op_reply_ismaster", EncodeOpReply(12, 7, reply));
  return 0;
}
