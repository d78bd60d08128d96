#include "core/graph_def_values.h"

#include <cstring>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace ipuflow::graph_def_internal {
namespace {

#define IPUFLOW_SAME_VALUE_(D, P) \
  static_assert(static_cast<int>(DType::D) == P, #D " != " #P)
IPUFLOW_SAME_VALUE_(kInvalid, DT_INVALID);
IPUFLOW_SAME_VALUE_(kFloat32, DT_FLOAT);
IPUFLOW_SAME_VALUE_(kFloat16, DT_HALF);
IPUFLOW_SAME_VALUE_(kInt32, DT_INT32);
IPUFLOW_SAME_VALUE_(kInt64, DT_INT64);
IPUFLOW_SAME_VALUE_(kBool, DT_BOOL);
IPUFLOW_SAME_VALUE_(kResource, DT_RESOURCE);
#undef IPUFLOW_SAME_VALUE_

// TensorProto.content is little-endian and is copied as is.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "GraphDef tensors need byte swapping on big-endian hosts");

absl::StatusOr<DType> DTypeFromProto(int value) {
  if (value < DT_INVALID || value > DT_RESOURCE) {
    return absl::InvalidArgumentError(absl::StrCat("unknown DataType ", value));
  }
  return static_cast<DType>(value);
}

DataType DTypeToProto(DType dtype) { return static_cast<DataType>(dtype); }

void ShapeToProto(const TensorShape& shape, TensorShapeProto* out) {
  for (int64_t d : shape.dims()) out->add_dim(d);
}

absl::StatusOr<TensorShape> ShapeFromProto(const TensorShapeProto& p) {
  TensorShape shape(absl::MakeConstSpan(p.dim().data(), p.dim_size()));
  RETURN_IF_ERROR(ValidateShape(shape));
  return shape;
}

absl::Status TensorToProto(const Tensor& t, TensorProto* out) {
  if (!t.valid() || t.dtype() == DType::kResource) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot serialise a ", DTypeName(t.dtype()),
        " tensor (only float32, float16, int32, int64 and bool values)"));
  }
  out->set_dtype(DTypeToProto(t.dtype()));
  ShapeToProto(t.shape(), out->mutable_shape());
  out->set_content(static_cast<const char*>(t.raw_data()), t.TotalBytes());
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TensorFromProto(const TensorProto& p) {
  ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(p.dtype()));
  ASSIGN_OR_RETURN(TensorShape shape, ShapeFromProto(p.shape()));
  if (dtype == DType::kInvalid || dtype == DType::kResource) {
    return absl::InvalidArgumentError(
        absl::StrCat("a tensor cannot have dtype ", DTypeName(dtype)));
  }
  const std::string what = absl::StrCat(DTypeName(dtype), shape.DebugString());
  int64_t n = 1;
  for (int64_t d : shape.dims()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", what, " has an unknown dimension"));
    }
    if (__builtin_mul_overflow(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", what, " has too many elements"));
    }
  }
  const size_t size = DTypeSize(dtype);
  if (p.content().size() % size != 0 ||
      static_cast<uint64_t>(n) != p.content().size() / size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", what, " needs ", n, " x ", size,
                     " bytes of content, found ", p.content().size()));
  }
  Tensor t(dtype, shape);
  if (n == 0) return t;
  if (dtype == DType::kBool) {
    bool* out = t.data<bool>();
    for (int64_t i = 0; i < n; ++i) out[i] = p.content()[i] != 0;
  } else {
    std::memcpy(t.raw_data(), p.content().data(), p.content().size());
  }
  return t;
}

template <typename T, typename Repeated, typename Fn>
absl::StatusOr<AttrValue> ListFromProto(const Repeated& values, Fn convert) {
  std::vector<T> out;
  out.reserve(values.size());
  for (const auto& v : values) {
    ASSIGN_OR_RETURN(T x, convert(v));
    out.push_back(std::move(x));
  }
  return AttrValue(std::move(out));
}

template <typename T>
absl::StatusOr<T> Same(const T& v) {
  return v;
}

}  // namespace

// Fills `out` with the alternative `v` holds (none for an empty value).
absl::Status AttrToProto(const AttrValue& v, AttrValueProto* out) {
  return std::visit(
      [out](const auto& x) -> absl::Status {
        using T = std::decay_t<decltype(x)>;
        // mutable_*_list() sets the oneof case even for an empty list.
        if constexpr (std::is_same_v<T, int64_t>) {
          out->set_i(x);
        } else if constexpr (std::is_same_v<T, float>) {
          out->set_f(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          out->set_b(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out->set_s(x);
        } else if constexpr (std::is_same_v<T, DType>) {
          out->set_type(DTypeToProto(x));
        } else if constexpr (std::is_same_v<T, TensorShape>) {
          ShapeToProto(x, out->mutable_shape());
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return TensorToProto(x, out->mutable_tensor());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out->mutable_int_list()->mutable_value()->Add(x.begin(), x.end());
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          out->mutable_float_list()->mutable_value()->Add(x.begin(), x.end());
        } else if constexpr (std::is_same_v<T, std::vector<DType>>) {
          auto* list = out->mutable_type_list();
          for (DType d : x) list->add_value(DTypeToProto(d));
        } else if constexpr (std::is_same_v<T, std::vector<TensorShape>>) {
          auto* list = out->mutable_shape_list();
          for (const TensorShape& shape : x)
            ShapeToProto(shape, list->add_value());
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          auto* list = out->mutable_string_list();
          for (const std::string& str : x) list->add_value(str);
        } else {
          static_assert(std::is_same_v<T, std::monostate>, "unhandled type");
        }
        return absl::OkStatus();
      },
      v.value());
}

absl::StatusOr<AttrValue> AttrFromProto(const AttrValueProto& p) {
  using P = AttrValueProto;
  switch (p.value_case()) {
    case P::VALUE_NOT_SET:
      return AttrValue();
    case P::kI:
      return AttrValue(static_cast<int64_t>(p.i()));
    case P::kF:
      return AttrValue(p.f());
    case P::kB:
      return AttrValue(p.b());
    case P::kS:
      return AttrValue(p.s());
    case P::kType: {
      ASSIGN_OR_RETURN(DType d, DTypeFromProto(p.type()));
      return AttrValue(d);
    }
    case P::kShape: {
      ASSIGN_OR_RETURN(TensorShape s, ShapeFromProto(p.shape()));
      return AttrValue(std::move(s));
    }
    case P::kTensor: {
      ASSIGN_OR_RETURN(Tensor t, TensorFromProto(p.tensor()));
      return AttrValue(std::move(t));
    }
    case P::kIntList:
      return ListFromProto<int64_t>(p.int_list().value(), Same<int64_t>);
    case P::kFloatList:
      return ListFromProto<float>(p.float_list().value(), Same<float>);
    case P::kTypeList:
      return ListFromProto<DType>(p.type_list().value(), DTypeFromProto);
    case P::kShapeList:
      return ListFromProto<TensorShape>(p.shape_list().value(), ShapeFromProto);
    case P::kStringList:
      return ListFromProto<std::string>(p.string_list().value(),
                                        Same<std::string>);
  }
  return absl::InvalidArgumentError("unknown AttrValue alternative");
}

}  // namespace ipuflow::graph_def_internal
