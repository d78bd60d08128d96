// ReadIdx: loads an IDX file (the format of MNIST and Fashion-MNIST), plain
// or gzip-compressed, into a Tensor of the requested dtype.
//
//   IdxReadOptions opts;
//   opts.dtype = DType::kFloat32;
//   opts.scale = 1.0 / 255;                     // uint8 pixels -> [0, 1]
//   ASSIGN_OR_RETURN(Tensor images, ReadIdx(dir + "/t10k-images-idx3-ubyte.gz",
//                                           opts));
//   // images: float32[10000,28,28]
//
// The format, all integers big-endian:
//   offset 0: 0x00 0x00 <type code> <rank>
//   offset 4: rank uint32 dimensions
//   then:     the elements, row-major.
// Type codes: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
// 0x0E float64. Compression is detected from the content (zlib's gzread reads
// plain files as they are), not from the name.
//
// Errors name the file and, for a bad file, the byte offset (in the
// decompressed stream) of the problem:
//   NotFound         no file at `path`;
//   InvalidArgument  malformed header, trailing bytes, or a dtype/scale the
//                    data cannot be converted to;
//   OutOfRange       the file ends before the data its header announces;
//   DataLoss         corrupt gzip data.
//
// Thread safety: the functions keep no state; call them from any thread.
#ifndef IPUFLOW_FEEDS_IDX_READER_H_
#define IPUFLOW_FEEDS_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ipuflow::feeds {

// The element types an IDX file may hold (the third byte of its magic).
enum class IdxType : uint8_t {
  kUint8 = 0x08,
  kInt8 = 0x09,
  kInt16 = 0x0B,
  kInt32 = 0x0C,
  kFloat32 = 0x0D,
  kFloat64 = 0x0E,
};

struct IdxHeader {
  IdxType type = IdxType::kUint8;
  std::vector<int64_t> dims;
  int64_t data_offset = 0;  // Where the elements start: 4 + 4 * rank.
};

struct IdxReadOptions {
  // kFloat32, kFloat16, kInt32 or kInt64. Floating-point IDX data can only
  // be read as a floating dtype.
  DType dtype = DType::kFloat32;
  // Floating dtypes only: every value is multiplied by `scale`.
  double scale = 1.0;
  // Reads only the first `max_rows` entries along dimension 0 (-1: all).
  // Bytes after them are then not checked.
  int64_t max_rows = -1;
};

// Reads and validates only the header.
absl::StatusOr<IdxHeader> ReadIdxHeader(const std::string& path);

// Reads the whole file (or its first `options.max_rows` rows).
absl::StatusOr<Tensor> ReadIdx(const std::string& path,
                               const IdxReadOptions& options = {});

// Bytes per element of `type`.
int IdxTypeSize(IdxType type);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_IDX_READER_H_
