#include "proxy/wire/compression.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>

namespace remold::wire {

std::optional<Compressor> CompressorFromName(std::string_view name) {
  if (name == "snappy") return Compressor::kSnappy;
  if (name == "zlib") return Compressor::kZlib;
  if (name == "zstd") return Compressor::kZstd;
  if (name == "noop") return Compressor::kNoop;
  return std::nullopt;
}

std::optional<Compressor> CompressorFromId(uint8_t id) {
  if (id <= static_cast<uint8_t>(Compressor::kZstd)) return static_cast<Compressor>(id);
  return std::nullopt;
}

std::string_view CompressorName(Compressor c) {
  switch (c) {
    case Compressor::kNoop: return "noop";
    case Compressor::kSnappy: return "snappy";
    case Compressor::kZlib: return "zlib";
    case Compressor::kZstd: return "zstd";
  }
  return "unknown";
}

void Compress(Compressor c, std::span<const uint8_t> input, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  const char* src = reinterpret_cast<const char*>(input.data());
  switch (c) {
    case Compressor::kNoop:
      out.insert(out.end(), input.begin(), input.end());
      return;
    case Compressor::kSnappy: {
      out.resize(start + snappy::MaxCompressedLength(input.size()));
      size_t written = 0;
      snappy::RawCompress(src, input.size(), reinterpret_cast<char*>(out.data() + start), &written);
      out.resize(start + written);
      return;
    }
    case Compressor::kZlib: {
      uLongf written = compressBound(input.size());
      out.resize(start + written);
      compress2(out.data() + start, &written, input.data(), input.size(), Z_DEFAULT_COMPRESSION);
      out.resize(start + written);
      return;
    }
    case Compressor::kZstd: {
      out.resize(start + ZSTD_compressBound(input.size()));
      size_t written = ZSTD_compress(out.data() + start, out.size() - start, input.data(),
                                     input.size(), ZSTD_CLEVEL_DEFAULT);
      out.resize(start + (ZSTD_isError(written) ? 0 : written));
      return;
    }
  }
}

std::optional<std::string> CheckDeclaredSize(Compressor c, std::span<const uint8_t> input,
                                             size_t expected_size) {
  // zlib's deflate cannot exceed a ratio of about 1032:1.
  constexpr size_t kMaxZlibRatio = 1032;
  switch (c) {
    case Compressor::kNoop:
      if (input.size() != expected_size) return "noop payload size differs from uncompressedSize";
      return std::nullopt;
    case Compressor::kSnappy: {
      size_t length = 0;
      if (!snappy::GetUncompressedLength(reinterpret_cast<const char*>(input.data()), input.size(),
                                         &length))
        return "corrupt snappy payload";
      if (length != expected_size) return "snappy payload size differs from uncompressedSize";
      return std::nullopt;
    }
    case Compressor::kZlib:
      if (expected_size > input.size() * kMaxZlibRatio + 64)
        return "zlib payload is too small for its uncompressedSize";
      return std::nullopt;
    case Compressor::kZstd: {
      unsigned long long length = ZSTD_getFrameContentSize(input.data(), input.size());
      if (length == ZSTD_CONTENTSIZE_ERROR) return "corrupt zstd payload";
      if (length != ZSTD_CONTENTSIZE_UNKNOWN && length != expected_size)
        return "zstd payload size differs from uncompressedSize";
      return std::nullopt;
    }
  }
  return "unknown compressor";
}

std::optional<std::string> Decompress(Compressor c, std::span<const uint8_t> input,
                                      std::span<uint8_t> out) {
  const size_t expected_size = out.size();
  switch (c) {
    case Compressor::kNoop:
      if (input.size() != expected_size) return "noop payload size differs from uncompressedSize";
      if (expected_size) std::memcpy(out.data(), input.data(), expected_size);
      return std::nullopt;
    case Compressor::kSnappy: {
      const char* src = reinterpret_cast<const char*>(input.data());
      size_t length = 0;
      if (!snappy::GetUncompressedLength(src, input.size(), &length))
        return "corrupt snappy payload";
      if (length != expected_size) return "snappy payload size differs from uncompressedSize";
      if (!snappy::RawUncompress(src, input.size(), reinterpret_cast<char*>(out.data())))
        return "corrupt snappy payload";
      return std::nullopt;
    }
    case Compressor::kZlib: {
      // uncompress() fails with Z_BUF_ERROR when the payload inflates to more.
      uLongf length = expected_size;
      int rc = uncompress(out.data(), &length, input.data(), input.size());
      if (rc == Z_BUF_ERROR && input.size() > 0 && length == expected_size)
        return "zlib payload size differs from uncompressedSize";
      if (rc != Z_OK) return "corrupt zlib payload";
      if (length != expected_size) return "zlib payload size differs from uncompressedSize";
      return std::nullopt;
    }
    case Compressor::kZstd: {
      size_t length = ZSTD_decompress(out.data(), expected_size, input.data(), input.size());
      if (ZSTD_isError(length))
        return std::string("corrupt zstd payload: ") + ZSTD_getErrorName(length);
      if (length != expected_size) return "zstd payload size differs from uncompressedSize";
      return std::nullopt;
    }
  }
  return "unknown compressor";
}

}  // namespace remold::wire
