// libFuzzer target: one input is one message as a client would send it.
//
// The bytes go to DecodeRequest twice: with the 4-byte messageLength patched
// to the input size (what MessageStream guarantees) and as-is. When decoding
// succeeds, the reply paths run on the result: the handshake rewrite, the
// hello of a pooled connection and the login key, an OP_COMPRESSED round
// trip with every compressor, and an error reply. Every
// step checks what it promises, so a wrong answer aborts like a crash does.
#include <bson/bson.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "proxy/wire/bson_check.h"
#include "proxy/wire/compression.h"
#include "proxy/wire/error_reply.h"
#include "proxy/wire/handshake.h"
#include "proxy/wire/login_identity.h"
#include "proxy/wire/op_compressed.h"
#include "proxy/wire/op_msg.h"
#include "proxy/wire/op_query.h"
#include "proxy/wire/request.h"
#include "proxy/wire/shared_link_hello.h"
#include "proxy/wire/wire_format.h"

namespace {

using namespace remold::wire;
using Bytes = std::vector<uint8_t>;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_codec: invariant violated: %s\n", what);
  std::abort();
}

#define CHECK(cond) \
  do {              \
    if (!(cond)) Fail(#cond); \
  } while (0)

const Compressor kAll[] = {Compressor::kNoop, Compressor::kSnappy, Compressor::kZlib,
                           Compressor::kZstd};

bool Within(std::span<const uint8_t> inner, const Bytes& outer) {
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

// A reply message we built must parse back as what it claims to be.
void CheckReply(const Bytes& reply, int32_t expected_response_to) {
  CHECK(reply.size() >= static_cast<size_t>(kHeaderSize));
  MessageHeader header = ReadHeader(reply);
  CHECK(header.message_length == static_cast<int32_t>(reply.size()));
  CHECK(header.response_to == expected_response_to);
  if (header.op_code == static_cast<int32_t>(OpCode::kMsg)) {
    OpMsgView view;
    CHECK(!ParseOpMsg(reply, view));
  } else {
    CHECK(header.op_code == static_cast<int32_t>(OpCode::kReply));
    OpReplyView view;
    CHECK(!ParseOpReply(reply, view));
    CHECK(view.documents.size() == 1);
  }
}

// The handshake rewrite of a reply message: it either refuses and leaves the
// bytes alone, or produces a well-formed reply with the same IDs.
void ExerciseHandshakeRewrite(const Bytes& message, std::span<const Compressor> negotiated) {
  Bytes copy = message;
  if (!RewriteHandshakeMessage(copy, negotiated)) {
    CHECK(copy == message);
    return;
  }
  MessageHeader before = ReadHeader(message);
  MessageHeader after = ReadHeader(copy);
  CHECK(after.request_id == before.request_id);
  CHECK(after.response_to == before.response_to);
  CHECK(after.op_code == before.op_code);
  CheckReply(copy, before.response_to);
  if (after.op_code == static_cast<int32_t>(OpCode::kMsg)) {
    OpMsgView was, is;
    CHECK(!ParseOpMsg(message, was) && !ParseOpMsg(copy, is));
    CHECK(was.flags == is.flags);
  }
}

void ExerciseDecoded(const Bytes& message, const Request& request) {
  CHECK(message.size() >= static_cast<size_t>(kHeaderSize));
  CHECK(!request.command.empty() || request.is_legacy());
  CHECK(Within(request.command_document, message));
  CHECK(!ValidateDocument(request.command_document));
  CHECK(request.command == FirstKey(request.command_document));
  CHECK(request.is_handshake == IsHandshakeCommand(request.command));

  std::vector<Compressor> negotiated = request.offered_compressors;
  ExerciseHandshakeRewrite(message, negotiated);
  Bytes reply = RewriteHandshakeReply(request.command_document, negotiated);
  CHECK(!ValidateDocument(reply));

  for (Compressor c : kAll) {
    Bytes compressed = CompressMessage(message, c);
    CHECK(ReadHeader(compressed).message_length == static_cast<int32_t>(compressed.size()));
    Bytes restored;
    Compressor used = Compressor::kNoop;
    std::optional<WireError> error = DecompressMessage(compressed, restored, used);
    if (error) Fail(("DecompressMessage(CompressMessage(m)) failed: " + error->message).c_str());
    CHECK(used == c);
    CHECK(restored.size() == message.size());
    CHECK(ReadHeader(restored).message_length == static_cast<int32_t>(message.size()));
    // messageLength is the only field the envelope does not carry over.
    CHECK(std::equal(restored.begin() + 4, restored.end(), message.begin() + 4));
  }

  // Pooled mode: the hello a shared connection carries keeps its IDs and
  // is a well-formed handshake still; a login key is read without fault.
  if (request.is_handshake) {
    if (std::optional<Bytes> shared = SharedLinkHello(message)) {
      CHECK(ReadHeader(*shared).request_id == request.header.request_id);
      CHECK(ReadHeader(*shared).message_length == static_cast<int32_t>(shared->size()));
      Bytes again = *shared;
      Request edited;
      CHECK(!DecodeRequest(again, edited) && edited.is_handshake);
    }
    AwaitableHelloWait(request.command_document);
  }
  LoginIdentity(request.command_document);
  ConversationDone(request.command_document);

  WireError error = ProtocolError("command '" + request.command + "' refused");
  CheckReply(EncodeErrorReply(error, request.header.request_id, request.header.op_code, 1),
             request.header.request_id);
}

void Exercise(const Bytes& input) {
  Bytes message = input;
  Request request;
  std::optional<WireError> error = DecodeRequest(message, request);
  if (error) {
    CHECK(error->code.value != 0 && !error->code.name.empty() && !error->message.empty());
    int32_t op = request.header.op_code == static_cast<int32_t>(OpCode::kQuery)
                     ? request.header.op_code
                     : static_cast<int32_t>(OpCode::kMsg);
    CheckReply(EncodeErrorReply(*error, request.header.request_id, op, 7),
               request.header.request_id);
  } else {
    ExerciseDecoded(message, request);
  }
  // The same bytes as a backend reply: OP_MSG and OP_REPLY parsing and rewrite.
  int32_t op = ReadHeader(input).op_code;
  if (op == static_cast<int32_t>(OpCode::kMsg) || op == static_cast<int32_t>(OpCode::kReply)) {
    const Compressor negotiated[] = {Compressor::kZstd, Compressor::kSnappy};
    ExerciseHandshakeRewrite(input, negotiated);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // MessageStream never hands the codec fewer than 16 bytes or more than the
  // limit, so such inputs are outside DecodeRequest's contract.
  if (size < static_cast<size_t>(kHeaderSize) || size > static_cast<size_t>(kMaxMessageSize))
    return 0;
  Bytes input(data, data + size);
  const int32_t declared = LoadInt32(input.data());
  StoreInt32(input.data(), static_cast<int32_t>(size));
  Exercise(input);
  if (declared != static_cast<int32_t>(size)) {
    StoreInt32(input.data(), declared);
    Exercise(input);
  }
  return 0;
}
