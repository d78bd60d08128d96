#include "core/op_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ipuflow {

OpRegistration& OpRegistration::Input(std::string name) {
  IPU_CHECK(!def_->variadic_);
  def_->inputs_.push_back(std::move(name));
  return *this;
}

OpRegistration& OpRegistration::VariadicInput(std::string name) {
  IPU_CHECK(!def_->variadic_);
  def_->inputs_.push_back(std::move(name));
  def_->variadic_ = true;
  return *this;
}

OpRegistration& OpRegistration::Attr(std::string name, AttrValue value) {
  def_->attr_defaults_[std::move(name)] = std::move(value);
  return *this;
}

OpRegistration& OpRegistration::RequiredAttr(std::string name) {
  def_->required_attrs_.push_back(std::move(name));
  return *this;
}

OpRegistration& OpRegistration::SetShapeFn(ShapeFn fn) {
  def_->shape_fn_ = std::move(fn);
  return *this;
}

OpRegistration& OpRegistration::SetKernel(KernelFn fn) {
  def_->kernel_ = std::move(fn);
  return *this;
}

OpRegistration& OpRegistration::SetGradient(GradFn fn) {
  def_->gradient_ = std::move(fn);
  return *this;
}

OpRegistration& OpRegistration::NotDifferentiable(std::string reason) {
  def_->no_grad_ = std::move(reason);
  return *this;
}

OpRegistration& OpRegistration::SetStateful(ResourceAccess access) {
  def_->stateful_ = true;
  def_->resource_access_ = access;
  return *this;
}

OpRegistration& OpRegistration::Forwards(int output, int input) {
  def_->forwards_[output] = input;
  return *this;
}

OpRegistration& OpRegistration::SetAlwaysLive(AlwaysLive kind,
                                              AlwaysLiveBytesFn bytes) {
  IPU_CHECK(kind == AlwaysLive::kNone || bytes);
  def_->always_live_ = kind;
  def_->always_live_bytes_ = std::move(bytes);
  return *this;
}

OpRegistration& OpRegistration::SetSubPrograms(SubProgramsFn fn) {
  def_->sub_programs_ = std::move(fn);
  return *this;
}

OpRegistration& OpRegistration::SetConstantValue(ConstantValueFn fn) {
  def_->constant_value_ = std::move(fn);
  return *this;
}

OpRegistration& OpRegistration::SetNeedsFeed() {
  def_->needs_feed_ = true;
  return *this;
}

OpRegistry* OpRegistry::Global() {
  static OpRegistry* registry = new OpRegistry();
  return registry;
}

OpRegistration OpRegistry::Register(const std::string& name) {
  auto [it, inserted] = ops_.try_emplace(name, std::make_unique<OpDef>());
  if (!inserted) {
    std::fprintf(stderr, "op '%s' registered twice\n", name.c_str());
    std::abort();
  }
  it->second->name_ = name;
  return OpRegistration(it->second.get());
}

absl::StatusOr<const OpDef*> OpRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  if (it == ops_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "op '", name,
        "' is not registered (is its ops library linked? op libraries must "
        "be alwayslink)"));
  }
  return it->second.get();
}

std::vector<const OpDef*> OpRegistry::ops() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : ops_) out.push_back(def.get());
  return out;
}

void ShapeContext::set_output(int i, DType dtype, TensorShape shape) {
  if (static_cast<int>(out_dtypes_.size()) <= i) {
    out_dtypes_.resize(i + 1, DType::kInvalid);
    out_shapes_.resize(i + 1);
  }
  out_dtypes_[i] = dtype;
  out_shapes_[i] = std::move(shape);
}

std::string ShapeContext::InputName(int i) const {
  const auto& names = def_->input_names();
  if (i < static_cast<int>(names.size()) &&
      !(def_->variadic_input() && i == static_cast<int>(names.size()) - 1)) {
    return absl::StrCat("input '", names[i], "'");
  }
  if (def_->variadic_input()) {
    return absl::StrCat("input '", names.back(), "[",
                        i - static_cast<int>(names.size()) + 1, "]'");
  }
  return absl::StrCat("input ", i);
}

absl::Status ShapeContext::ExpectRank(int input, int rank) const {
  if (input_shape(input).rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        InputName(input), " must have rank ", rank, ", got shape ",
        input_shape(input).DebugString()));
  }
  return absl::OkStatus();
}

absl::Status ShapeContext::ExpectFloat(int input) const {
  if (!IsFloating(input_dtype(input))) {
    return absl::InvalidArgumentError(absl::StrCat(
        InputName(input), " must be float32 or float16, got ",
        DTypeName(input_dtype(input))));
  }
  return absl::OkStatus();
}

absl::Status ShapeContext::ExpectDType(int input, DType dtype) const {
  if (input_dtype(input) != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(InputName(input), " must be ", DTypeName(dtype), ", got ",
                     DTypeName(input_dtype(input))));
  }
  return absl::OkStatus();
}

absl::Status ShapeContext::ExpectSameDType(int a, int b) const {
  if (input_dtype(a) != input_dtype(b)) {
    return absl::InvalidArgumentError(absl::StrCat(
        InputName(a), " is ", DTypeName(input_dtype(a)), " but ",
        InputName(b), " is ", DTypeName(input_dtype(b)),
        "; they must match (use Cast)"));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow
