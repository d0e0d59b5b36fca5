// The compressors of OP_COMPRESSED: noop (0), snappy (1), zlib (2), zstd (3).
//
// Decompress checks that the output has exactly the size the envelope
// declared; it never allocates more than that size, which the caller has
// already bounded by the message size limit.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace remold::wire {

enum class Compressor : uint8_t { kNoop = 0, kSnappy = 1, kZlib = 2, kZstd = 3 };

// "snappy" -> kSnappy, etc. Names are the ones drivers put in hello.
std::optional<Compressor> CompressorFromName(std::string_view name);
std::optional<Compressor> CompressorFromId(uint8_t id);
std::string_view CompressorName(Compressor c);

// Appends the compressed form of `input` to `out`.
void Compress(Compressor c, std::span<const uint8_t> input, std::vector<uint8_t>& out);

// Checks, without decompressing, that `input` can plausibly inflate to
// `expected_size` bytes, so a tiny message cannot make the proxy allocate
// a large buffer for nothing. Returns the reason when it cannot.
std::optional<std::string> CheckDeclaredSize(Compressor c, std::span<const uint8_t> input,
                                             size_t expected_size);

// Decompresses `input` into exactly `out.size()` bytes. Returns an error
// message on corrupt input or when the output size differs.
std::optional<std::string> Decompress(Compressor c, std::span<const uint8_t> input,
                                      std::span<uint8_t> out);

}  // namespace remold::wire
