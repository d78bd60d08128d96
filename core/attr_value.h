// AttrValue: the value of one node attribute (an int, a float, a shape, a
// tensor, a function name, ...), and AttrMap, a node's attributes by name.
//
//   AttrMap attrs = {{"transpose_a", true}, {"axes", std::vector<int64_t>{0}}};
//   ASSIGN_OR_RETURN(bool ta, GetAttr<bool>(attrs, "transpose_a"));
//
// A value type; thread-compatible.
#ifndef IPUFLOW_CORE_ATTR_VALUE_H_
#define IPUFLOW_CORE_ATTR_VALUE_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tensor_shape.h"

namespace ipuflow {

// An attribute's type as an op declares it (core/op_registry.h); the values
// are the indices of AttrValue::Value's alternatives.
enum class AttrType {
  kInt = 1,
  kFloat,
  kBool,
  kString,
  kDType,
  kShape,
  kTensor,
  kIntList,
  kFloatList,
  kDTypeList,
  kShapeList,
  kStringList,
};
// "int", "list(shape)", ... as in OpDef signatures.
const char* AttrTypeName(AttrType type);

class AttrValue {
 public:
  using Value =
      std::variant<std::monostate, int64_t, float, bool, std::string, DType,
                   TensorShape, Tensor, std::vector<int64_t>,
                   std::vector<float>, std::vector<DType>,
                   std::vector<TensorShape>, std::vector<std::string>>;

  AttrValue() = default;
  AttrValue(int v) : value_(static_cast<int64_t>(v)) {}
  AttrValue(int64_t v) : value_(v) {}
  AttrValue(float v) : value_(v) {}
  AttrValue(double v) : value_(static_cast<float>(v)) {}
  AttrValue(bool v) : value_(v) {}
  AttrValue(const char* v) : value_(std::string(v)) {}
  AttrValue(std::string v) : value_(std::move(v)) {}
  AttrValue(DType v) : value_(v) {}
  AttrValue(TensorShape v) : value_(std::move(v)) {}
  AttrValue(Tensor v) : value_(std::move(v)) {}
  AttrValue(std::vector<int64_t> v) : value_(std::move(v)) {}
  AttrValue(std::vector<int> v)
      : value_(std::vector<int64_t>(v.begin(), v.end())) {}
  AttrValue(std::vector<float> v) : value_(std::move(v)) {}
  AttrValue(std::vector<DType> v) : value_(std::move(v)) {}
  AttrValue(std::vector<TensorShape> v) : value_(std::move(v)) {}
  AttrValue(std::vector<std::string> v) : value_(std::move(v)) {}

  const Value& value() const { return value_; }
  bool empty() const { return value_.index() == 0; }
  // REQUIRES: !empty().
  AttrType type() const { return static_cast<AttrType>(value_.index()); }
  template <typename T>
  const T* get() const {
    return std::get_if<T>(&value_);
  }
  std::string DebugString() const;
  // A stable string for fingerprints (tensors by content).
  void AppendFingerprint(std::string* out) const;

 private:
  Value value_;
};

using AttrMap = std::map<std::string, AttrValue>;

// The attribute's type name as written in OpDef signatures ("int", "shape").
template <typename T>
const char* AttrTypeName();

template <typename T>
absl::StatusOr<T> GetAttr(const AttrMap& attrs, const std::string& name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing attribute '", name, "'"));
  }
  const T* v = it->second.get<T>();
  if (v == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", name, "' is ", it->second.DebugString(),
                     ", expected a value of type ", AttrTypeName<T>()));
  }
  return *v;
}

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_ATTR_VALUE_H_
