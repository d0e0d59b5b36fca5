// Little-endian loads and stores for wire-protocol integers.
//
// The MongoDB wire protocol is little-endian throughout. These helpers read
// and write at arbitrary (unaligned) offsets; callers check bounds first.
#pragma once

#include <cstdint>
#include <cstring>

namespace remold::wire {

inline int32_t LoadInt32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<int32_t>(v);
}

inline uint32_t LoadUint32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void StoreInt32(uint8_t* p, int32_t v) { std::memcpy(p, &v, sizeof v); }
inline void StoreUint32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "remold assumes a little-endian host, as the wire protocol is");

}  // namespace remold::wire
