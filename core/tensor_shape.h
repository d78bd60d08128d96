// TensorShape: the dimensions of a tensor. While a graph is being built a
// dimension may be unknown (kUnknownDim, printed '?'), for example the batch
// dimension of a Placeholder; at run time every shape is fully defined.
//
//   TensorShape s({40, 784});
//   s.num_elements() == 31360;  s.DebugString() == "[40,784]"
//   TensorShape({-1, 10}).IsCompatibleWith({8, 10}) == true
//
// Shape arithmetic that outside bytes can reach (a GraphDef, a feed, an IDX
// header) goes through the checked helpers below, so no shape whose element
// count or byte size wraps int64 can exist: Graph::AddNode checks every
// attribute shape and every inferred output shape with ValidateShape, and
// tensors are allocated through Tensor::Allocate (ResourceExhausted).
//
// A value type; thread-compatible.
#ifndef IPUFLOW_CORE_TENSOR_SHAPE_H_
#define IPUFLOW_CORE_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ipuflow {

inline constexpr int64_t kUnknownDim = -1;

// The largest tensor ipuflow accepts: 2^48 bytes (256 TiB, the x86-64
// virtual address space). Every element is at least one byte, so this also
// bounds element counts; products of dimensions within it never wrap int64.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;
inline constexpr int64_t kMaxTensorElements = kMaxTensorBytes;

// a * b and a + b on sizes; false if the result wraps int64 (out unchanged).
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

class TensorShape {
 public:
  TensorShape() = default;  // A scalar.
  TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit TensorShape(absl::Span<const int64_t> dims)
      : dims_(dims.begin(), dims.end()) {}

  static TensorShape Scalar() { return TensorShape(); }
  static TensorShape Vector(int64_t n) { return TensorShape({n}); }

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  std::vector<int64_t> dim_vector() const {
    return std::vector<int64_t>(dims_.begin(), dims_.end());
  }
  void set_dim(int i, int64_t d) { dims_[i] = d; }
  void AddDim(int64_t d) { dims_.push_back(d); }
  void InsertDim(int i, int64_t d) { dims_.insert(dims_.begin() + i, d); }
  void RemoveDim(int i) { dims_.erase(dims_.begin() + i); }

  bool IsFullyDefined() const;
  // Product of dims; kUnknownDim if any dim is unknown. 1 for a scalar.
  // Saturates at INT64_MAX on overflow (ValidateShape refuses such shapes
  // before they reach a node or a tensor).
  int64_t num_elements() const;
  // Product of dims [begin, end); same conventions.
  int64_t DimProduct(int begin, int end) const;
  // The element count, or InvalidArgument naming the shape if a dimension is
  // negative or unknown, or the count exceeds kMaxTensorElements.
  absl::StatusOr<int64_t> CheckedNumElements() const;

  // Same rank and every pair of known dims equal.
  bool IsCompatibleWith(const TensorShape& other) const;
  // The most specific shape compatible with both, or an error.
  static absl::StatusOr<TensorShape> Merge(const TensorShape& a,
                                           const TensorShape& b);

  std::string DebugString() const;  // "[2,?,3]"; "[]" for a scalar.

  bool operator==(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator!=(const TensorShape& o) const { return dims_ != o.dims_; }

  template <typename H>
  friend H AbslHashValue(H h, const TensorShape& s) {
    return H::combine(std::move(h), s.dims_);
  }

 private:
  absl::InlinedVector<int64_t, 4> dims_;
};

// OK if every dimension is >= 0 or kUnknownDim and the product of the known
// dimensions is at most kMaxTensorElements; else InvalidArgument naming the
// shape and the limit.
absl::Status ValidateShape(const TensorShape& shape);

// num_elements x element_size, or ResourceExhausted naming `what` (e.g.
// "float32[2,3]") if that exceeds kMaxTensorBytes (or wraps).
absl::StatusOr<int64_t> CheckedByteSize(int64_t num_elements,
                                        int64_t element_size,
                                        const std::string& what);

// `dim` + `before` + `after` for padding-like ops (Pad, convolution
// windows), or InvalidArgument if a term is negative or the sum exceeds
// kMaxTensorElements.
absl::StatusOr<int64_t> PaddedDim(int64_t dim, int64_t before, int64_t after);

// numpy broadcasting of two shapes ('?' broadcasts like an unknown size).
// The error names both shapes.
absl::StatusOr<TensorShape> BroadcastShapes(const TensorShape& a,
                                            const TensorShape& b);

// Resolves a possibly negative axis against `rank`; error if out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_TENSOR_SHAPE_H_
