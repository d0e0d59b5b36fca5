#include "proxy/wire/compression.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace remold::wire {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes Text(std::string_view s) { return Bytes(s.begin(), s.end()); }

// Half random, half repetitive, so every compressor has real work to do.
Bytes MixedData(size_t size) {
  Bytes data(size);
  std::mt19937 rng(12345);
  for (size_t i = 0; i < size; ++i)
    data[i] = i % 2048 < 1024 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>('a' + i % 7);
  return data;
}

Bytes CompressBytes(Compressor c, const Bytes& input) {
  Bytes out;
  Compress(c, input, out);
  return out;
}

TEST(CompressorNames, FromNameKnowsTheDriverNames) {
  EXPECT_EQ(CompressorFromName("snappy"), Compressor::kSnappy);
  EXPECT_EQ(CompressorFromName("zlib"), Compressor::kZlib);
  EXPECT_EQ(CompressorFromName("zstd"), Compressor::kZstd);
  EXPECT_EQ(CompressorFromName("noop"), Compressor::kNoop);
  EXPECT_EQ(CompressorFromName("lz4"), std::nullopt);
  EXPECT_EQ(CompressorFromName("Snappy"), std::nullopt);
  EXPECT_EQ(CompressorFromName(""), std::nullopt);
}

TEST(CompressorNames, FromIdAcceptsOnlyZeroToThree) {
  EXPECT_EQ(CompressorFromId(0), Compressor::kNoop);
  EXPECT_EQ(CompressorFromId(1), Compressor::kSnappy);
  EXPECT_EQ(CompressorFromId(2), Compressor::kZlib);
  EXPECT_EQ(CompressorFromId(3), Compressor::kZstd);
  EXPECT_EQ(CompressorFromId(4), std::nullopt);
  EXPECT_EQ(CompressorFromId(255), std::nullopt);
}

TEST(CompressorNames, NameRoundTrips) {
  for (Compressor c : {Compressor::kNoop, Compressor::kSnappy, Compressor::kZlib, Compressor::kZstd})
    EXPECT_EQ(CompressorFromName(CompressorName(c)), c);
}

class CompressionTest : public ::testing::TestWithParam<Compressor> {};

std::string ParamName(const ::testing::TestParamInfo<Compressor>& info) {
  return std::string(CompressorName(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllCompressors, CompressionTest,
                         ::testing::Values(Compressor::kNoop, Compressor::kSnappy,
                                           Compressor::kZlib, Compressor::kZstd),
                         ParamName);

void ExpectRoundTrip(Compressor c, const Bytes& input) {
  Bytes compressed = CompressBytes(c, input);
  Bytes output(input.size());
  std::optional<std::string> error = Decompress(c, compressed, output);
  ASSERT_FALSE(error) << *error;
  EXPECT_TRUE(output == input) << "round trip of " << input.size() << " bytes differs";
}

TEST_P(CompressionTest, RoundTripsText) {
  ExpectRoundTrip(GetParam(), Text("{ping: 1, $db: 'admin'} the quick brown fox the quick brown fox"));
}

TEST_P(CompressionTest, RoundTripsEmptyInput) { ExpectRoundTrip(GetParam(), {}); }

TEST_P(CompressionTest, RoundTripsOneMebibyte) { ExpectRoundTrip(GetParam(), MixedData(1 << 20)); }

TEST_P(CompressionTest, CompressAppendsAfterExistingBytes) {
  Bytes input = Text("appended payload appended payload");
  Bytes out = {0xAA, 0xBB, 0xCC};
  Compress(GetParam(), input, out);
  ASSERT_GT(out.size(), 3u);
  EXPECT_EQ(out[0], 0xAA);
  EXPECT_EQ(out[1], 0xBB);
  EXPECT_EQ(out[2], 0xCC);
  Bytes payload(out.begin() + 3, out.end());
  EXPECT_EQ(payload, CompressBytes(GetParam(), input));
}

TEST(Compression, RepetitiveDataShrinks) {
  Bytes input(64 * 1024, 'x');
  for (Compressor c : {Compressor::kSnappy, Compressor::kZlib, Compressor::kZstd})
    EXPECT_LT(CompressBytes(c, input).size(), input.size() / 10) << CompressorName(c);
  EXPECT_EQ(CompressBytes(Compressor::kNoop, input), input);
}

TEST_P(CompressionTest, OutputOneByteShortIsRejected) {
  Bytes input = MixedData(4096);
  Bytes compressed = CompressBytes(GetParam(), input);
  Bytes output(input.size() - 1);
  EXPECT_TRUE(Decompress(GetParam(), compressed, output).has_value());
}

TEST_P(CompressionTest, OutputOneByteLongIsRejected) {
  Bytes input = MixedData(4096);
  Bytes compressed = CompressBytes(GetParam(), input);
  Bytes output(input.size() + 1);
  EXPECT_TRUE(Decompress(GetParam(), compressed, output).has_value());
}

TEST_P(CompressionTest, EmptyPayloadForNonEmptyOutputIsRejected) {
  Bytes output(10);
  EXPECT_TRUE(Decompress(GetParam(), {}, output).has_value());
}

TEST_P(CompressionTest, TruncatedPayloadIsRejected) {
  Bytes input = MixedData(4096);
  Bytes compressed = CompressBytes(GetParam(), input);
  for (size_t cut : {size_t{1}, size_t{4}, compressed.size() / 2}) {
    Bytes truncated(compressed.begin(), compressed.end() - cut);
    Bytes output(input.size());
    EXPECT_TRUE(Decompress(GetParam(), truncated, output).has_value()) << "cut " << cut;
  }
}

TEST_P(CompressionTest, DoesNotWriteOutsideTheOutputSpan) {
  Bytes input = MixedData(1000);
  Bytes compressed = CompressBytes(GetParam(), input);
  Bytes buffer(input.size() + 32, 0xEE);
  std::span<uint8_t> output(buffer.data() + 16, input.size());
  ASSERT_FALSE(Decompress(GetParam(), compressed, output).has_value());
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(buffer[i], 0xEE) << "byte before the output changed";
    EXPECT_EQ(buffer[buffer.size() - 1 - i], 0xEE) << "byte after the output changed";
  }
  EXPECT_TRUE(std::equal(output.begin(), output.end(), input.begin()));
}

TEST(Compression, CorruptSnappyIsRejected) {
  Bytes garbage = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x02};
  Bytes output(100);
  EXPECT_TRUE(Decompress(Compressor::kSnappy, garbage, output).has_value());
  // A valid length prefix (100) followed by a copy that reaches before the start.
  Bytes bad_copy = {100, 0x01 | (0 << 2), 0x10, 0x00};
  EXPECT_TRUE(Decompress(Compressor::kSnappy, bad_copy, output).has_value());
}

TEST(Compression, CorruptZlibIsRejected) {
  Bytes output(100);
  EXPECT_TRUE(Decompress(Compressor::kZlib, Text("this is not a zlib stream"), output).has_value());
  Bytes input = MixedData(100);
  Bytes compressed = CompressBytes(Compressor::kZlib, input);
  compressed[compressed.size() / 2] ^= 0x55;  // the adler32 trailer catches any change
  EXPECT_TRUE(Decompress(Compressor::kZlib, compressed, output).has_value());
}

TEST(Compression, ZlibWithWrongTrailerIsRejected) {
  Bytes input = MixedData(100);
  Bytes compressed = CompressBytes(Compressor::kZlib, input);
  compressed.back() ^= 0x01;
  Bytes output(input.size());
  EXPECT_TRUE(Decompress(Compressor::kZlib, compressed, output).has_value());
}

TEST(Compression, CorruptZstdIsRejected) {
  Bytes output(100);
  std::optional<std::string> error =
      Decompress(Compressor::kZstd, Text("this is not a zstd frame"), output);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("zstd"), std::string::npos) << *error;
}

TEST(Compression, ZstdFrameFollowedByGarbageIsRejected) {
  Bytes input = MixedData(100);
  Bytes compressed = CompressBytes(Compressor::kZstd, input);
  compressed.push_back(0x00);
  compressed.push_back(0x01);
  Bytes output(input.size());
  EXPECT_TRUE(Decompress(Compressor::kZstd, compressed, output).has_value());
}

TEST(Compression, NoopSizeMismatchIsRejected) {
  Bytes output(5);
  EXPECT_TRUE(Decompress(Compressor::kNoop, Text("abcd"), output).has_value());
  EXPECT_TRUE(Decompress(Compressor::kNoop, Text("abcdef"), output).has_value());
  EXPECT_FALSE(Decompress(Compressor::kNoop, Text("abcde"), output).has_value());
}

}  // namespace
}  // namespace remold::wire
