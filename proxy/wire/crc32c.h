// CRC-32C (Castagnoli), the checksum of OP_MSG's checksumPresent flag.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise.
#pragma once

#include <cstdint>
#include <span>

namespace remold::wire {

uint32_t Crc32c(std::span<const uint8_t> data);

}  // namespace remold::wire
