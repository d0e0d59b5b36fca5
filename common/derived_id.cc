#include "common/derived_id.h"

#include <cstdint>
#include <cstring>

namespace remold {
namespace {

// FNV-1a, 64 bits, from `basis`.
uint64_t Fnv1a(std::string_view bytes, uint64_t basis) {
  uint64_t hash = basis;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

bson_oid_t DerivedObjectId(std::string_view seed) {
  const uint64_t high = Fnv1a(seed, 0xcbf29ce484222325ULL);
  const uint64_t low = Fnv1a(seed, 0x84222325cbf29ce4ULL);
  uint8_t bytes[12];
  std::memcpy(bytes, &high, 8);
  std::memcpy(bytes + 8, &low, 4);
  bson_oid_t oid;
  bson_oid_init_from_data(&oid, bytes);
  return oid;
}

void AppendDerivedId(bson_t* out, const char* key, std::string_view seed) {
  const bson_oid_t oid = DerivedObjectId(seed);
  BSON_APPEND_OID(out, key, &oid);
}

}  // namespace remold
