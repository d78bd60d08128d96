#include "core/scope.h"

#include "absl/strings/str_cat.h"

namespace ipuflow {

Scope Scope::NewRootScope() {
  auto shared = std::make_shared<Shared>();
  shared->graph = std::make_shared<Graph>();
  return Scope(std::move(shared));
}

Scope Scope::NewSubScope(const std::string& name) const {
  Scope s = *this;
  s.op_name_.clear();
  if (!name.empty()) {
    std::string full =
        prefix_.empty() ? name : absl::StrCat(prefix_, "/", name);
    s.prefix_ = graph()->UniqueName(full);
  }
  return s;
}

Scope Scope::WithOpName(const std::string& name) const {
  Scope s = *this;
  s.op_name_ = name;
  return s;
}

Scope Scope::WithIpu(int ipu) const {
  Scope s = *this;
  s.ipu_ = ipu;
  return s;
}

Scope Scope::WithBlock(const std::string& block) const {
  Scope s = *this;
  s.block_ = block;
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Node*>& deps) const {
  Scope s = *this;
  for (Node* n : deps) {
    if (n != nullptr) s.control_deps_.push_back(n);
  }
  return s;
}

Scope Scope::WithNoControlDependencies() const {
  Scope s = *this;
  s.control_deps_.clear();
  return s;
}

void Scope::UpdateStatus(const absl::Status& s) const {
  if (shared_->status.ok() && !s.ok()) shared_->status = s;
}

Node* Scope::AddNode(const std::string& op, std::vector<Output> inputs,
                     AttrMap attrs, const std::string& default_name) const {
  if (!ok()) return nullptr;
  for (const Output& in : inputs) {
    if (!in.valid()) {
      UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          op, ": an input is invalid (built from an earlier failed op)")));
      return nullptr;
    }
  }
  std::string base =
      op_name_.empty() ? (default_name.empty() ? op : default_name) : op_name_;
  if (!prefix_.empty()) base = absl::StrCat(prefix_, "/", base);
  NodeSpec spec;
  spec.op = op;
  spec.name = graph()->UniqueName(base);
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  spec.control_inputs = control_deps_;
  spec.ipu = ipu_;
  spec.block = block_;
  absl::StatusOr<Node*> node = graph()->AddNode(std::move(spec));
  if (!node.ok()) {
    UpdateStatus(node.status());
    return nullptr;
  }
  return *node;
}

}  // namespace ipuflow
