#include "proxy/wire/op_compressed.h"

#include <cstring>
#include <string>

#include "proxy/wire/byte_io.h"
#include "proxy/wire/wire_format.h"

namespace remold::wire {
namespace {

constexpr size_t kEnvelopeSize = 4 + 4 + 1;

bool IsCompressibleOpCode(int32_t op) {
  return op == static_cast<int32_t>(OpCode::kMsg) || op == static_cast<int32_t>(OpCode::kQuery) ||
         op == static_cast<int32_t>(OpCode::kReply);
}

}  // namespace

std::optional<WireError> DecompressMessage(std::span<const uint8_t> message, std::vector<uint8_t>& out,
                                           Compressor& used) {
  if (message.size() < kHeaderSize + kEnvelopeSize)
    return ProtocolError("OP_COMPRESSED is too short");
  MessageHeader header = ReadHeader(message);
  const uint8_t* p = message.data() + kHeaderSize;
  int32_t original_opcode = LoadInt32(p);
  int32_t uncompressed_size = LoadInt32(p + 4);
  uint8_t compressor_id = p[8];
  if (!IsCompressibleOpCode(original_opcode))
    return ProtocolError("OP_COMPRESSED wraps an opcode that cannot be compressed: " +
                         std::to_string(original_opcode));
  if (uncompressed_size < 0 || uncompressed_size > kMaxMessageSize - kHeaderSize)
    return ProtocolError("OP_COMPRESSED uncompressedSize is out of range");
  std::optional<Compressor> compressor = CompressorFromId(compressor_id);
  if (!compressor)
    return ProtocolError("OP_COMPRESSED uses unknown compressor id " +
                         std::to_string(compressor_id));

  std::span<const uint8_t> payload = message.subspan(kHeaderSize + kEnvelopeSize);
  if (auto error = CheckDeclaredSize(*compressor, payload, static_cast<size_t>(uncompressed_size)))
    return ProtocolError("OP_COMPRESSED: " + *error);
  out.resize(kHeaderSize + static_cast<size_t>(uncompressed_size));
  std::span<uint8_t> body = std::span<uint8_t>(out).subspan(kHeaderSize);
  if (auto error = Decompress(*compressor, payload, body))
    return ProtocolError("OP_COMPRESSED: " + *error);
  WriteHeader(out.data(), {static_cast<int32_t>(out.size()), header.request_id,
                           header.response_to, original_opcode});
  used = *compressor;
  return std::nullopt;
}

std::vector<uint8_t> CompressMessage(std::span<const uint8_t> message, Compressor compressor) {
  MessageHeader header = ReadHeader(message);
  std::span<const uint8_t> body = message.subspan(kHeaderSize);
  std::vector<uint8_t> out(kHeaderSize + kEnvelopeSize);
  uint8_t* p = out.data() + kHeaderSize;
  StoreInt32(p, header.op_code);
  StoreInt32(p + 4, static_cast<int32_t>(body.size()));
  p[8] = static_cast<uint8_t>(compressor);
  Compress(compressor, body, out);
  WriteHeader(out.data(), {static_cast<int32_t>(out.size()), header.request_id,
                           header.response_to, static_cast<int32_t>(OpCode::kCompressed)});
  return out;
}

}  // namespace remold::wire
