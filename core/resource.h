// ResourceMgr and VariableResource: the state that outlives one run of a
// program. Each device (the host Session, each emulated IPU) owns one
// ResourceMgr; a Variable node names its variable, and the ops that read and
// write it find it here.
//
// Thread safety: ResourceMgr is safe for concurrent use. A VariableResource's
// value is guarded by its mutex; ReadVariable copies under the lock and the
// Assign ops write under it, so a reader never sees a half-written value.
#ifndef IPUFLOW_CORE_RESOURCE_H_
#define IPUFLOW_CORE_RESOURCE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mutex.h"
#include "core/tensor.h"

namespace ipuflow {

class VariableResource : public Resource {
 public:
  VariableResource(std::string name, DType dtype, TensorShape shape)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)) {}

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  std::string DebugString() const override;

  // A copy of the value; FailedPrecondition if never assigned.
  absl::StatusOr<Tensor> Read() const;
  // Copies the value into `out` (same dtype and shape).
  absl::Status ReadInto(const Tensor& out) const;
  // Replaces the value; `value` must match dtype and shape.
  absl::Status Assign(const Tensor& value);
  // value += sign * delta.
  absl::Status AssignAdd(const Tensor& delta, float sign);
  // Runs `fn` on the value in place, under the lock (the value is copied
  // first if another tensor shares its buffer, as AssignAdd does): fused
  // optimizer updates write their variable and slots in one pass instead of
  // reading copies and assigning them back. FailedPrecondition if never
  // assigned. `fn` must not read or write this variable another way.
  absl::Status Update(const std::function<void(Tensor&)>& fn);
  bool initialized() const;
  // Takes the value out, leaving the variable uninitialised (its memory
  // lives elsewhere until Assign brings it back: weight-update offloading).
  Tensor Release();

 private:
  absl::Status CheckCompatible(const Tensor& t, const char* what) const;

  const std::string name_;
  const DType dtype_;
  const TensorShape shape_;
  mutable Mutex mu_;
  Tensor value_ ABSL_GUARDED_BY(mu_);
};

class ResourceMgr {
 public:
  // The variable called `name`, created on first use. An existing variable
  // with another dtype or shape is InvalidArgument.
  absl::StatusOr<std::shared_ptr<VariableResource>> LookupOrCreateVariable(
      const std::string& name, DType dtype, const TensorShape& shape);
  std::shared_ptr<VariableResource> FindVariable(const std::string& name) const;
  std::vector<std::shared_ptr<VariableResource>> variables() const;
  void Clear();

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<VariableResource>> variables_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_RESOURCE_H_
