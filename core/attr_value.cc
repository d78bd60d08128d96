#include "core/attr_value.h"

#include "absl/strings/str_join.h"

namespace ipuflow {

template <>
const char* AttrTypeName<int64_t>() {
  return "int";
}
template <>
const char* AttrTypeName<float>() {
  return "float";
}
template <>
const char* AttrTypeName<bool>() {
  return "bool";
}
template <>
const char* AttrTypeName<std::string>() {
  return "string";
}
template <>
const char* AttrTypeName<DType>() {
  return "dtype";
}
template <>
const char* AttrTypeName<TensorShape>() {
  return "shape";
}
template <>
const char* AttrTypeName<Tensor>() {
  return "tensor";
}
template <>
const char* AttrTypeName<std::vector<int64_t>>() {
  return "list(int)";
}
template <>
const char* AttrTypeName<std::vector<float>>() {
  return "list(float)";
}
template <>
const char* AttrTypeName<std::vector<DType>>() {
  return "list(dtype)";
}
template <>
const char* AttrTypeName<std::vector<TensorShape>>() {
  return "list(shape)";
}
template <>
const char* AttrTypeName<std::vector<std::string>>() {
  return "list(string)";
}

const char* AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kBool:
      return "bool";
    case AttrType::kString:
      return "string";
    case AttrType::kDType:
      return "dtype";
    case AttrType::kShape:
      return "shape";
    case AttrType::kTensor:
      return "tensor";
    case AttrType::kIntList:
      return "list(int)";
    case AttrType::kFloatList:
      return "list(float)";
    case AttrType::kDTypeList:
      return "list(dtype)";
    case AttrType::kShapeList:
      return "list(shape)";
    case AttrType::kStringList:
      return "list(string)";
  }
  return "?";
}

namespace {

struct Printer {
  std::string operator()(std::monostate) const { return "<empty>"; }
  std::string operator()(int64_t v) const { return absl::StrCat(v); }
  std::string operator()(float v) const { return absl::StrCat(v); }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(const std::string& v) const {
    return absl::StrCat("\"", v, "\"");
  }
  std::string operator()(DType v) const { return std::string(DTypeName(v)); }
  std::string operator()(const TensorShape& v) const { return v.DebugString(); }
  std::string operator()(const Tensor& v) const { return v.DebugString(); }
  std::string operator()(const std::vector<int64_t>& v) const {
    return absl::StrCat("[", absl::StrJoin(v, ","), "]");
  }
  std::string operator()(const std::vector<float>& v) const {
    return absl::StrCat("[", absl::StrJoin(v, ","), "]");
  }
  std::string operator()(const std::vector<DType>& v) const {
    return absl::StrCat("[",
                        absl::StrJoin(v, ",",
                                      [](std::string* o, DType d) {
                                        absl::StrAppend(o, DTypeName(d));
                                      }),
                        "]");
  }
  std::string operator()(const std::vector<TensorShape>& v) const {
    return absl::StrCat("[",
                        absl::StrJoin(v, ",",
                                      [](std::string* o, const TensorShape& s) {
                                        absl::StrAppend(o, s.DebugString());
                                      }),
                        "]");
  }
  std::string operator()(const std::vector<std::string>& v) const {
    return absl::StrCat("[", absl::StrJoin(v, ","), "]");
  }
};

}  // namespace

std::string AttrValue::DebugString() const {
  return std::visit(Printer(), value_);
}

void AttrValue::AppendFingerprint(std::string* out) const {
  absl::StrAppend(out, value_.index(), ":");
  if (const Tensor* t = get<Tensor>()) {
    absl::StrAppend(out, DTypeName(t->dtype()), t->shape().DebugString());
    out->append(static_cast<const char*>(t->raw_data()), t->TotalBytes());
  } else {
    absl::StrAppend(out, DebugString());
  }
  out->push_back(';');
}

}  // namespace ipuflow
