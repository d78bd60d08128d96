#include "core/op_registry.h"

#include <algorithm>

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
  IPU_CHECK(!value.empty() && !def_->attrs_.count(name));
  AttrDef& a = def_->attrs_[name];
  a.name = std::move(name);
  a.type = value.type();
  a.default_value = std::move(value);
  return *this;
}

OpRegistration& OpRegistration::RequiredAttr(std::string name, AttrType type) {
  IPU_CHECK(!def_->attrs_.count(name));
  AttrDef& a = def_->attrs_[name];
  a.name = std::move(name);
  a.type = type;
  a.required = true;
  return *this;
}

OpRegistration& OpRegistration::OptionalAttr(std::string name, AttrType type) {
  IPU_CHECK(!def_->attrs_.count(name));
  AttrDef& a = def_->attrs_[name];
  a.name = std::move(name);
  a.type = type;
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

OpRegistration& OpRegistration::SetReplicaIdentity(ReplicaIdentity identity) {
  def_->replica_identity_ = identity;
  return *this;
}

OpRegistration& OpRegistration::SetReplicaIdentity(ReplicaIdentityFn fn) {
  def_->replica_identity_fn_ = std::move(fn);
  return *this;
}

OpRegistration& OpRegistration::SetDivisorInput(int input) {
  def_->divisor_input_ = input;
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

FusionRegistration OpRegistry::RegisterFusion(const std::string& name) {
  auto [it, inserted] =
      fusions_.try_emplace(name, std::make_unique<FusionDef>());
  if (!inserted) {
    std::fprintf(stderr, "fusion '%s' registered twice\n", name.c_str());
    std::abort();
  }
  it->second->name = name;
  return FusionRegistration(it->second.get());
}

std::vector<const FusionDef*> OpRegistry::fusions() const {
  std::vector<const FusionDef*> out;
  for (const auto& [name, def] : fusions_) out.push_back(def.get());
  std::stable_sort(out.begin(), out.end(),
                   [](const FusionDef* a, const FusionDef* b) {
                     return a->ops.size() > b->ops.size();
                   });
  return out;
}

FusionRegistration& FusionRegistration::Chain(std::vector<std::string> ops,
                                              std::vector<int> chain_inputs) {
  if (ops.size() < 2 || chain_inputs.size() + 1 != ops.size()) {
    std::fprintf(stderr,
                 "fusion '%s': a chain needs >= 2 ops and one chain "
                 "input per op after the first\n",
                 def_->name.c_str());
    std::abort();
  }
  def_->ops = std::move(ops);
  def_->chain_inputs = std::move(chain_inputs);
  return *this;
}

FusionRegistration& FusionRegistration::SetApplies(
    std::function<bool(absl::Span<const Node* const>)> fn) {
  def_->applies = std::move(fn);
  return *this;
}

FusionRegistration& FusionRegistration::SetKernel(KernelFn fn) {
  def_->kernel = std::move(fn);
  return *this;
}

std::vector<const OpDef*> OpRegistry::ops() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : ops_) out.push_back(def.get());
  return out;
}

absl::Status OpDef::CheckAttrs(AttrMap* attrs) const {
  for (const auto& [key, value] : *attrs) {  // Sorted: deterministic errors.
    const AttrDef* a = FindAttr(key);
    if (a == nullptr) {
      if (!key.empty() && key[0] == '_') continue;  // An annotation.
      std::string declared;
      for (const auto& [name, d] : attrs_) {
        absl::StrAppend(&declared, declared.empty() ? "" : ", ", name, ": ",
                        AttrTypeName(d.type));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown attribute '", key, "' = ", value.DebugString(), " (op ",
          name_, " declares ", declared.empty() ? "none" : declared,
          "; annotations start with '_')"));
    }
    if (value.empty() || value.type() != a->type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribute '", key, "' is ",
          value.empty() ? "empty" : AttrTypeName(value.type()), " ",
          value.DebugString(), ", expected ", AttrTypeName(a->type)));
    }
    const DType* dtype = value.get<DType>();
    const auto* dtypes = value.get<std::vector<DType>>();
    if ((dtype != nullptr && *dtype == DType::kInvalid) ||
        (dtypes != nullptr &&
         std::count(dtypes->begin(), dtypes->end(), DType::kInvalid) > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", key, "' is ", value.DebugString(),
                       ": 'invalid' is not a dtype"));
    }
    if (const TensorShape* shape = value.get<TensorShape>()) {
      absl::Status s = ValidateShape(*shape);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("attribute '", key, "': ", s.message()));
      }
    }
    if (const auto* shapes = value.get<std::vector<TensorShape>>()) {
      for (size_t i = 0; i < shapes->size(); ++i) {
        absl::Status s = ValidateShape((*shapes)[i]);
        if (!s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("attribute '", key, "'[", i, "]: ", s.message()));
        }
      }
    }
  }
  for (const auto& [key, a] : attrs_) {
    if (attrs->count(key)) continue;
    if (a.required) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing required attribute '", key, "' (",
                       AttrTypeName(a.type), ")"));
    }
    if (!a.default_value.empty()) (*attrs)[key] = a.default_value;
  }
  return absl::OkStatus();
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
    return absl::InvalidArgumentError(
        absl::StrCat(InputName(input), " must have rank ", rank, ", got shape ",
                     input_shape(input).DebugString()));
  }
  return absl::OkStatus();
}

absl::Status ShapeContext::ExpectFloat(int input) const {
  if (!IsFloating(input_dtype(input))) {
    return absl::InvalidArgumentError(
        absl::StrCat(InputName(input), " must be float32 or float16, got ",
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
        InputName(a), " is ", DTypeName(input_dtype(a)), " but ", InputName(b),
        " is ", DTypeName(input_dtype(b)), "; they must match (use Cast)"));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow
