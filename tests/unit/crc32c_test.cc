#include "proxy/wire/crc32c.h"

#include <gtest/gtest.h>

#include <array>
#include <string_view>
#include <vector>

namespace remold::wire {
namespace {

uint32_t Crc(std::string_view s) {
  return Crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

// Bit-at-a-time reference, independent of the table and SSE4.2 paths.
uint32_t ReferenceCrc32c(std::span<const uint8_t> data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32c, StandardCheckValue) { EXPECT_EQ(Crc("123456789"), 0xE3069283u); }

TEST(Crc32c, EmptyInputIsZero) { EXPECT_EQ(Crc32c({}), 0u); }

// RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, Rfc3720ThirtyTwoZeros) {
  std::array<uint8_t, 32> data{};
  EXPECT_EQ(Crc32c(data), 0x8A9136AAu);
}

TEST(Crc32c, Rfc3720ThirtyTwoOnes) {
  std::array<uint8_t, 32> data;
  data.fill(0xFF);
  EXPECT_EQ(Crc32c(data), 0x62A8AB43u);
}

TEST(Crc32c, Rfc3720IncrementingBytes) {
  std::array<uint8_t, 32> data;
  for (int i = 0; i < 32; ++i) data[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(data), 0x46DD794Eu);
}

TEST(Crc32c, Rfc3720DecrementingBytes) {
  std::array<uint8_t, 32> data;
  for (int i = 0; i < 32; ++i) data[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(data), 0x113FDB5Cu);
}

TEST(Crc32c, Rfc3720IscsiReadPdu) {
  const std::array<uint8_t, 48> pdu = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(Crc32c(pdu), 0xD9963A56u);
}

// Every length and alignment exercises the 8-byte loop and the byte tail.
TEST(Crc32c, MatchesReferenceForAllLengthsAndOffsets) {
  std::vector<uint8_t> data(300);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t length = 0; offset + length <= 200; ++length) {
      std::span<const uint8_t> slice(data.data() + offset, length);
      ASSERT_EQ(Crc32c(slice), ReferenceCrc32c(slice)) << "offset " << offset << " length " << length;
    }
  }
}

TEST(Crc32c, SingleBitFlipChangesChecksum) {
  std::vector<uint8_t> data(64, 0x5A);
  uint32_t before = Crc32c(data);
  data[40] ^= 0x01;
  EXPECT_NE(Crc32c(data), before);
}

}  // namespace
}  // namespace remold::wire
