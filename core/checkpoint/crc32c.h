// CRC32C (Castagnoli, the polynomial of iSCSI, RFC 3720 appendix B.4): the
// checksum of every tensor in a checkpoint file. The SSE4.2 crc32
// instruction where the CPU has it (checked at run time), otherwise
// slicing-by-8 tables; both give the same value.
//
//   uint32_t c = Crc32c(data, size);
//   c = Crc32cExtend(c, more, more_size);  // == Crc32c of both, joined
#ifndef IPUFLOW_CORE_CHECKPOINT_CRC32C_H_
#define IPUFLOW_CORE_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace ipuflow::checkpoint {

// The CRC of `size` bytes at `data` continuing `crc` (the CRC of the bytes
// before them; 0 for none).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) {
  return Crc32cExtend(0, data, size);
}

// The table version alone (tests compare the two).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t size);
// Whether Crc32cExtend uses the CPU's crc32 instruction.
bool Crc32cUsesHardware();

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_CRC32C_H_
