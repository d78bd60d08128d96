#include "core/tensor.h"

#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/tensor_eigen.h"

namespace ipuflow {

namespace {

// malloc, then aligned by hand: glibc's aligned_alloc takes the memalign
// path (a larger chunk split, its ends freed and consolidated), about a
// fifth of a small device loop's iteration (`perf` of BM_RepeatNoInfeed in
// //feeds:feed_benchmark), while a small malloc comes from the thread's
// cache. Costs at most kTensorAlignment - 1 bytes per buffer. Returns the
// block to free; *data is its first aligned byte.
void* AlignedAlloc(size_t bytes, void** data) {
  if (bytes > static_cast<size_t>(kMaxTensorBytes)) return nullptr;
  void* raw = std::malloc(bytes + kTensorAlignment - 1);
  if (raw == nullptr) return nullptr;
  const uintptr_t p = reinterpret_cast<uintptr_t>(raw);
  *data = reinterpret_cast<void*>((p + kTensorAlignment - 1) &
                                  ~uintptr_t{kTensorAlignment - 1});
  return raw;
}

}  // namespace

TensorBuffer::TensorBuffer(size_t bytes) : data_(nullptr), bytes_(bytes) {
  owned_ = AlignedAlloc(bytes, &data_);
  IPU_CHECK(owned_ != nullptr);
}

std::shared_ptr<TensorBuffer> TensorBuffer::TryAllocate(size_t bytes) {
  void* data = nullptr;
  void* owned = AlignedAlloc(bytes, &data);
  if (owned == nullptr) return nullptr;
  auto buffer = std::make_shared<TensorBuffer>(data, bytes, nullptr);
  buffer->owned_ = owned;
  return buffer;
}

TensorBuffer::TensorBuffer(void* data, size_t bytes,
                           std::shared_ptr<void> keep_alive)
    : data_(data),
      bytes_(bytes),
      owned_(nullptr),
      keep_alive_(std::move(keep_alive)) {}

TensorBuffer::~TensorBuffer() { std::free(owned_); }

Tensor::Tensor(DType dtype, const TensorShape& shape)
    : dtype_(dtype), shape_(shape), num_elements_(shape.num_elements()) {
  IPU_CHECK(shape.IsFullyDefined());
  IPU_CHECK(ValidateShape(shape).ok());
  IPU_CHECK(CheckedByteSize(num_elements_, DTypeSize(dtype), "").ok());
  buffer_ = std::make_shared<TensorBuffer>(TotalBytes());
}

absl::StatusOr<Tensor> Tensor::Allocate(DType dtype, const TensorShape& shape) {
  // Built only for an error: callers allocate on hot paths (every run's
  // unplanned outputs).
  auto what = [&] {
    return absl::StrCat(DTypeName(dtype), shape.DebugString());
  };
  if (dtype == DType::kInvalid || dtype == DType::kResource) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a tensor ", what()));
  }
  absl::StatusOr<int64_t> n = shape.CheckedNumElements();
  if (!n.ok()) {
    // Too many elements for any machine: memory, not a malformed shape.
    if (shape.IsFullyDefined()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate tensor ", what(), ": ", n.status().message()));
    }
    return n.status();
  }
  absl::StatusOr<int64_t> bytes = CheckedByteSize(*n, DTypeSize(dtype), "");
  if (!bytes.ok())
    return CheckedByteSize(*n, DTypeSize(dtype), what()).status();
  std::shared_ptr<TensorBuffer> buffer =
      TensorBuffer::TryAllocate(static_cast<size_t>(*bytes));
  if (buffer == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate tensor ",
                                                     what(), " (", *bytes,
                                                     " bytes): out of memory"));
  }
  return Tensor(dtype, shape, std::move(buffer), 0);
}

Tensor::Tensor(DType dtype, const TensorShape& shape,
               std::shared_ptr<TensorBuffer> buffer, size_t offset)
    : dtype_(dtype),
      shape_(shape),
      num_elements_(shape.num_elements()),
      buffer_(std::move(buffer)),
      offset_(offset) {
  IPU_CHECK(shape.IsFullyDefined());
  IPU_CHECK(buffer_ == nullptr || offset_ + TotalBytes() <= buffer_->size());
}

Tensor Tensor::ForResource(std::shared_ptr<Resource> resource) {
  Tensor t;
  t.dtype_ = DType::kResource;
  t.num_elements_ = 1;
  t.resource_ = std::move(resource);
  return t;
}

Tensor Tensor::Filled(DType dtype, const TensorShape& shape, double value) {
  if (!HoldsValues(dtype)) return Tensor();  // Was an abort (issue 22).
  Tensor t(dtype, shape);
  switch (dtype) {
    case DType::kInt32:
      t.flat<int32_t>().setConstant(SaturatingToInteger<int32_t>(value));
      break;
    case DType::kInt64:
      t.flat<int64_t>().setConstant(SaturatingToInteger<int64_t>(value));
      break;
    case DType::kFloat32:
      t.flat<float>().setConstant(static_cast<float>(value));
      break;
    case DType::kFloat16:
      t.flat<half>().setConstant(static_cast<half>(value));
      break;
    default:  // kBool (HoldsValues).
      t.flat<bool>().setConstant(value != 0);
  }
  return t;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  IPU_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= dim(0));
  TensorShape s = shape_;
  s.set_dim(0, end - begin);
  const size_t row_bytes = shape_.DimProduct(1, rank()) * DTypeSize(dtype_);
  return Tensor(dtype_, s, buffer_, offset_ + begin * row_bytes);
}

absl::StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (!shape.IsFullyDefined() || shape.num_elements() != num_elements_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", shape_.DebugString(), " (",
                     num_elements_, " elements) to ", shape.DebugString()));
  }
  return Tensor(dtype_, shape, buffer_, offset_);
}

Tensor Tensor::Copy() const {
  if (dtype_ == DType::kResource || !valid()) return *this;
  Tensor t(dtype_, shape_);
  t.CopyFrom(*this);
  return t;
}

void Tensor::CopyFrom(const Tensor& src) const {
  IPU_CHECK(src.dtype_ == dtype_ && src.num_elements_ == num_elements_);
  if (TotalBytes() > 0 && raw_data() != src.raw_data()) {
    std::memcpy(raw_data(), src.raw_data(), TotalBytes());
  }
}

double Tensor::ElementAsDouble(int64_t i) const {
  IPUFLOW_SWITCH_ALL(dtype_, return static_cast<double>(data<T>()[i]),
                     return 0.0);
  return 0.0;
}

std::string Tensor::DebugString(int max_entries) const {
  if (!valid()) return "<invalid tensor>";
  if (dtype_ == DType::kResource) {
    return absl::StrCat("resource(",
                        resource_ ? resource_->DebugString() : "null", ")");
  }
  std::string s = absl::StrCat(DTypeName(dtype_), shape_.DebugString(), " {");
  const int64_t n = std::min<int64_t>(num_elements_, max_entries);
  for (int64_t i = 0; i < n; ++i) {
    absl::StrAppend(&s, i ? ", " : "", ElementAsDouble(i));
  }
  if (num_elements_ > n) absl::StrAppend(&s, ", ...");
  absl::StrAppend(&s, "}");
  return s;
}

absl::StatusOr<Tensor> Stack(absl::Span<const Tensor> tensors) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Stack: no tensors to stack");
  }
  TensorShape shape = tensors[0].shape();
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].shape() != shape ||
        tensors[i].dtype() != tensors[0].dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Stack: element ", i, " is ", DTypeName(tensors[i].dtype()),
          tensors[i].shape().DebugString(), " but element 0 is ",
          DTypeName(tensors[0].dtype()), shape.DebugString()));
    }
  }
  TensorShape out_shape = shape;
  out_shape.InsertDim(0, static_cast<int64_t>(tensors.size()));
  Tensor out(tensors[0].dtype(), out_shape);
  const size_t bytes = tensors[0].TotalBytes();
  char* dst = static_cast<char*>(out.raw_data());
  for (const Tensor& t : tensors) {
    if (bytes) std::memcpy(dst, t.raw_data(), bytes);
    dst += bytes;
  }
  return out;
}

namespace {

// acc += t in two's complement (integer sums wrap, as on the device;
// signed overflow is undefined behaviour in C++).
template <typename I, typename U>
void WrappingAdd(Tensor* acc, const Tensor& t) {
  I* a = acc->data<I>();
  const I* b = t.data<I>();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    a[i] = static_cast<I>(static_cast<U>(a[i]) + static_cast<U>(b[i]));
  }
}

}  // namespace

absl::Status AddInto(Tensor* acc, const Tensor& t) {
  if (!acc->valid()) {
    *acc = t.Copy();
    return absl::OkStatus();
  }
  if (acc->dtype() != t.dtype() || acc->shape() != t.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot add ", DTypeName(t.dtype()), t.shape().DebugString(), " to ",
        DTypeName(acc->dtype()), acc->shape().DebugString()));
  }
  switch (t.dtype()) {
    case DType::kInt32:
      WrappingAdd<int32_t, uint32_t>(acc, t);
      break;
    case DType::kInt64:
      WrappingAdd<int64_t, uint64_t>(acc, t);
      break;
    default:
      IPUFLOW_SWITCH_NUMERIC(
          t.dtype(), acc->flat<T>() += t.flat<T>(),
          return absl::InvalidArgumentError(
              absl::StrCat("cannot sum ", DTypeName(t.dtype()), " values")));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow
