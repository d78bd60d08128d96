#include "core/resource.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/tensor_eigen.h"

namespace ipuflow {

std::string VariableResource::DebugString() const {
  return absl::StrCat("Variable '", name_, "' ", DTypeName(dtype_),
                      shape_.DebugString());
}

absl::Status VariableResource::CheckCompatible(const Tensor& t,
                                               const char* what) const {
  if (t.dtype() != dtype_ || t.shape() != shape_) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " to variable '", name_, "': value is ", DTypeName(t.dtype()),
        t.shape().DebugString(), " but the variable is ", DTypeName(dtype_),
        shape_.DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> VariableResource::Read() const {
  MutexLock l(&mu_);
  if (!value_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "variable '", name_,
        "' was read before it was initialised; run the initialisers first "
        "(Session::Initialize)"));
  }
  return value_.Copy();
}

absl::Status VariableResource::ReadInto(const Tensor& out) const {
  MutexLock l(&mu_);
  if (!value_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "variable '", name_,
        "' was read before it was initialised; run the initialisers first "
        "(Session::Initialize)"));
  }
  out.CopyFrom(value_);
  return absl::OkStatus();
}

absl::Status VariableResource::Assign(const Tensor& value) {
  RETURN_IF_ERROR(CheckCompatible(value, "Assign"));
  MutexLock l(&mu_);
  // Copy-on-write: a previous value handed out by Read() is never mutated.
  if (!value_.valid() || value_.buffer().use_count() > 1) {
    value_ = Tensor(dtype_, shape_);
  }
  value_.CopyFrom(value);
  return absl::OkStatus();
}

absl::Status VariableResource::AssignAdd(const Tensor& delta, float sign) {
  RETURN_IF_ERROR(CheckCompatible(delta, sign > 0 ? "AssignAdd" : "AssignSub"));
  MutexLock l(&mu_);
  if (!value_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "variable '", name_, "' was updated before it was initialised"));
  }
  if (value_.buffer().use_count() > 1) value_ = value_.Copy();
  IPUFLOW_SWITCH_NUMERIC(
      dtype_, if (sign > 0) value_.flat<T>() += delta.flat<T>();
      else value_.flat<T>() -= delta.flat<T>(),
      return absl::InvalidArgumentError(
          absl::StrCat("AssignAdd: unsupported dtype ", DTypeName(dtype_))));
  return absl::OkStatus();
}

absl::Status VariableResource::Update(const std::function<void(Tensor&)>& fn) {
  MutexLock l(&mu_);
  if (!value_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "variable '", name_,
        "' was updated before it was initialised; run the initialisers "
        "first (Session::Initialize)"));
  }
  if (value_.buffer().use_count() > 1) value_ = value_.Copy();
  fn(value_);
  return absl::OkStatus();
}

Tensor VariableResource::Release() {
  MutexLock l(&mu_);
  return std::exchange(value_, Tensor());
}

bool VariableResource::initialized() const {
  MutexLock l(&mu_);
  return value_.valid();
}

absl::StatusOr<std::shared_ptr<VariableResource>>
ResourceMgr::LookupOrCreateVariable(const std::string& name, DType dtype,
                                    const TensorShape& shape) {
  MutexLock l(&mu_);
  auto it = variables_.find(name);
  if (it != variables_.end()) {
    if (it->second->dtype() != dtype || it->second->shape() != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", name, "' already exists as ", it->second->DebugString(),
          "; requested ", DTypeName(dtype), shape.DebugString()));
    }
    return it->second;
  }
  auto v = std::make_shared<VariableResource>(name, dtype, shape);
  variables_[name] = v;
  return v;
}

std::shared_ptr<VariableResource> ResourceMgr::FindVariable(
    const std::string& name) const {
  MutexLock l(&mu_);
  auto it = variables_.find(name);
  return it == variables_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<VariableResource>> ResourceMgr::variables() const {
  MutexLock l(&mu_);
  std::vector<std::shared_ptr<VariableResource>> out;
  for (const auto& [name, v] : variables_) out.push_back(v);
  return out;
}

void ResourceMgr::Clear() {
  MutexLock l(&mu_);
  variables_.clear();
}

}  // namespace ipuflow
