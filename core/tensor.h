// Tensor: a typed, shaped view of a reference-counted, 64-byte-aligned buffer.
//
//   Tensor t(DType::kFloat32, {2, 3});
//   float* p = t.data<float>();
//   Tensor rows = t.Slice(1, 2);            // zero-copy view of row 1
//   auto v = t.flat<float>();               // Eigen::Map (core/tensor_eigen.h)
//   Tensor u = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
//
// Copying a Tensor copies the view, not the data: both share the buffer
// (like TensorFlow's Tensor). Use Copy() for a deep copy. A Tensor may also
// view memory it does not own (a device program's arena); such a view is
// only valid while its owner keeps the memory alive (see core/program.h).
//
// Thread safety: const methods may be called concurrently; writers to the
// same buffer must be synchronised externally.
#ifndef IPUFLOW_CORE_TENSOR_H_
#define IPUFLOW_CORE_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor_shape.h"

namespace ipuflow {

// Tensor::flat() and matrix()'s Eigen types: core/tensor_eigen.h.
template <typename T>
struct EigenViews;

inline constexpr size_t kTensorAlignment = 64;

// Owns (or borrows) a block of bytes. Shared by every Tensor viewing it.
class TensorBuffer {
 public:
  // Allocates `bytes` bytes aligned to kTensorAlignment; aborts if the
  // allocation fails (use TryAllocate for sizes from outside).
  explicit TensorBuffer(size_t bytes);
  // Null if the allocation fails.
  static std::shared_ptr<TensorBuffer> TryAllocate(size_t bytes);
  // Borrows `data`; `keep_alive` (may be null) owns it.
  TensorBuffer(void* data, size_t bytes, std::shared_ptr<void> keep_alive);
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
  void* owned_;  // The block to free (data_ lies inside it); null if borrowed.
  std::shared_ptr<void> keep_alive_;
};

// Base class of the objects a kResource tensor refers to (variables).
class Resource {
 public:
  virtual ~Resource() = default;
  virtual std::string DebugString() const = 0;
};

class Tensor {
 public:
  Tensor() = default;  // An invalid (empty) tensor: dtype() == kInvalid.
  // Allocates an uninitialised tensor. REQUIRES: shape fully defined and
  // within kMaxTensorBytes, memory available (else aborts: a programming
  // error). Sizes that come from outside go through Allocate.
  Tensor(DType dtype, const TensorShape& shape);
  // Allocates an uninitialised tensor: InvalidArgument for a shape that is
  // not fully defined or not a valid shape, ResourceExhausted (naming dtype
  // and shape) if it exceeds kMaxTensorBytes or the allocation fails.
  static absl::StatusOr<Tensor> Allocate(DType dtype, const TensorShape& shape);
  // A view of `buffer` starting at byte `offset`.
  Tensor(DType dtype, const TensorShape& shape,
         std::shared_ptr<TensorBuffer> buffer, size_t offset = 0);
  // A scalar kResource tensor referring to `resource`.
  static Tensor ForResource(std::shared_ptr<Resource> resource);

  template <typename T>
  static Tensor FromVector(const std::vector<T>& values,
                           const TensorShape& shape);
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values) {
    return FromVector(values,
                      TensorShape({static_cast<int64_t>(values.size())}));
  }
  template <typename T>
  static Tensor Scalar(T value) {
    return FromVector<T>({value}, TensorShape());
  }
  // A tensor with every element equal to `value` (converted to dtype;
  // integers saturate, NaN is 0); an invalid Tensor for a dtype that holds
  // no values (kInvalid, kResource).
  static Tensor Filled(DType dtype, const TensorShape& shape, double value);

  bool valid() const { return dtype_ != DType::kInvalid; }
  DType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t NumElements() const { return num_elements_; }
  size_t TotalBytes() const { return num_elements_ * DTypeSize(dtype_); }

  void* raw_data() const {
    return buffer_ ? static_cast<char*>(buffer_->data()) + offset_ : nullptr;
  }
  template <typename T>
  T* data() const {
    IPU_CHECK(DTypeOf<T>::value == dtype_);
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  absl::Span<T> span() const {
    return absl::Span<T>(data<T>(), num_elements_);
  }
  template <typename T>
  std::vector<T> ToVector() const {
    auto s = span<T>();
    return std::vector<T>(s.begin(), s.end());
  }
  // The elements as a flat Eigen array (unaligned: slices may start
  // anywhere), and a row-major [rows, cols] matrix view with rows * cols ==
  // NumElements(). Their Eigen types live in core/tensor_eigen.h, which a
  // file that calls them includes.
  template <typename T>
  auto flat() const {
    return EigenViews<T>::Flat(data<T>(), num_elements_);
  }
  template <typename T>
  auto matrix(int64_t rows, int64_t cols) const {
    IPU_CHECK(rows * cols == num_elements_);
    return EigenViews<T>::Matrix(data<T>(), rows, cols);
  }
  template <typename T>
  T scalar() const {
    IPU_CHECK(num_elements_ == 1);
    return *data<T>();
  }

  // Zero-copy view of rows [begin, end) along dimension 0.
  Tensor Slice(int64_t begin, int64_t end) const;
  // Zero-copy view with another shape of the same number of elements.
  absl::StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // Deep copy into a new buffer.
  Tensor Copy() const;
  // Copies `src` (same dtype and element count) into this tensor's memory.
  void CopyFrom(const Tensor& src) const;
  bool SharesBufferWith(const Tensor& other) const {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }
  const std::shared_ptr<TensorBuffer>& buffer() const { return buffer_; }
  const std::shared_ptr<Resource>& resource() const { return resource_; }

  // "float32[2,2] {1, 2, 3, 4}" (at most `max_entries` values).
  std::string DebugString(int max_entries = 8) const;
  // Element i converted to double (any numeric dtype); for tests and printing.
  double ElementAsDouble(int64_t i) const;

 private:
  DType dtype_ = DType::kInvalid;
  TensorShape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<TensorBuffer> buffer_;
  size_t offset_ = 0;
  std::shared_ptr<Resource> resource_;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values,
                          const TensorShape& shape) {
  Tensor t(DTypeOf<T>::value, shape);
  IPU_CHECK(static_cast<int64_t>(values.size()) == t.NumElements());
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
  } else {
    if (!values.empty()) {
      std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
    }
  }
  return t;
}

// Stacks same-shaped tensors along a new leading dimension.
absl::StatusOr<Tensor> Stack(absl::Span<const Tensor> tensors);

// *acc += t element-wise, in place (numeric dtypes; int32 and int64 wrap in
// two's complement); an invalid *acc becomes a copy of t. InvalidArgument
// for another dtype or shape, or bool.
absl::Status AddInto(Tensor* acc, const Tensor& t);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_TENSOR_H_
