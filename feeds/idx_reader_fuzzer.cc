// Fuzz target: an IDX file (plain or gzip) through ReadIdxHeader and ReadIdx
// with each kind of destination dtype, and a leading slice.
#include "core/status.h"
#include "core/testing/fuzz.h"
#include "feeds/idx_reader.h"

IPUFLOW_FUZZ_TARGET(idx_reader) {
  using ipuflow::feeds::IdxReadOptions;
  const std::string path = ipuflow::fuzzing::WriteInput(data, size, ".idx");
  absl::StatusOr<ipuflow::feeds::IdxHeader> header =
      ipuflow::feeds::ReadIdxHeader(path);
  IdxReadOptions as_float;
  as_float.scale = 1.0 / 255;
  IdxReadOptions as_int;
  as_int.dtype = ipuflow::DType::kInt64;
  IdxReadOptions first_rows;
  first_rows.dtype = ipuflow::DType::kFloat16;
  first_rows.max_rows = 2;
  for (const IdxReadOptions& options : {as_float, as_int, first_rows}) {
    absl::StatusOr<ipuflow::Tensor> t = ipuflow::feeds::ReadIdx(path, options);
    if (!t.ok()) continue;
    // What was read has the shape the header announced (or its slice).
    IPU_CHECK(header.ok());
    IPU_CHECK(t->shape().rank() == static_cast<int>(header->dims.size()));
    for (int i = 1; i < t->shape().rank(); ++i) {
      IPU_CHECK(t->shape().dim(i) == header->dims[i]);
    }
  }
}
