#include "ops/math/partials_type.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::ops {

absl::Status CheckPartialsType(const ShapeContext& c) {
  ASSIGN_OR_RETURN(std::string p, c.attr<std::string>(kPartialsTypeAttr));
  if (p == kPartialsFloat || p == kPartialsHalf) return absl::OkStatus();
  // PopTorch's setPartialsType raises ValueError for any type but
  // torch.half and torch.float.
  return absl::InvalidArgumentError(
      absl::StrCat("partials_type must be \"half\" or \"float\", got \"", p,
                   "\" (as PopTorch's Precision.setPartialsType: only half "
                   "and float partials are allowed)"));
}

bool HalfPartials(const Node& node) {
  return node.attr<std::string>(kPartialsTypeAttr) == kPartialsHalf;
}

}  // namespace ipuflow::ops
