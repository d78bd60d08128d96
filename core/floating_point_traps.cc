#include "core/floating_point_traps.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "core/resource.h"

namespace ipuflow {
namespace {

inline float ToFloat(float v) { return v; }
inline float ToFloat(half v) { return static_cast<float>(v); }

inline bool NonFinite(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & 0x7f800000U) == 0x7f800000U;
}
inline bool NonFinite(half v) {
  return (Eigen::numext::bit_cast<uint16_t>(v) & 0x7c00U) == 0x7c00U;
}

// The first non-finite element of p[from, n), or -1. Blocks of branch-free
// tests, so the common case (all finite) vectorises.
template <typename T>
int64_t FirstNonFinite(const T* p, int64_t n, int64_t from) {
  constexpr int64_t kBlock = 256;
  for (int64_t b = from; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    bool any = false;
    for (int64_t i = b; i < e; ++i) any |= NonFinite(p[i]);
    if (!any) continue;
    for (int64_t i = b; i < e; ++i) {
      if (NonFinite(p[i])) return i;
    }
  }
  return -1;
}

struct InputFacts {
  bool any_nan = false;
  bool all_finite = true;
};

template <typename T>
void Scan(const Tensor& t, InputFacts* f) {
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const float v = ToFloat(p[i]);
    f->any_nan |= std::isnan(v);
    f->all_finite &= std::isfinite(v);
  }
}

InputFacts ScanInputs(const KernelContext& ctx) {
  InputFacts f;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (!t.valid()) continue;
    if (t.dtype() == DType::kFloat32) Scan<float>(t, &f);
    if (t.dtype() == DType::kFloat16) Scan<half>(t, &f);
  }
  return f;
}

bool HasFloatInput(const KernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).valid() && IsFloating(ctx.input(i).dtype())) return true;
  }
  return false;
}

bool HasZero(const Tensor& t) {
  if (!t.valid()) return false;
  if (t.dtype() == DType::kFloat32) {
    for (float v : t.span<float>())
      if (v == 0) return true;
  } else if (t.dtype() == DType::kFloat16) {
    for (half v : t.span<half>())
      if (static_cast<float>(v) == 0) return true;
  }
  return false;
}

// The trap a non-finite value v falls under, with the end of the message;
// null if none (or its trap is off). `overflowed`: RoundToHalf noted a
// nanoo overflow in the tensor.
const char* Classify(const FloatingPointBehaviour& fp, const KernelContext& ctx,
                     const InputFacts& in, bool overflowed, float v,
                     const char** why) {
  if (std::isnan(v)) {
    if (overflowed) {
      *why = "from a float16 overflow (nanoo)";
      return fp.oflo ? "oflo" : nullptr;
    }
    *why = "from non-NaN inputs";
    return fp.inv && !in.any_nan ? "inv" : nullptr;
  }
  if (!in.all_finite) return nullptr;  // inf in, inf out.
  const int divisor = ctx.node().op_def().divisor_input();
  if (divisor >= 0 && divisor < ctx.num_inputs() &&
      HasZero(ctx.input(divisor))) {
    *why = "from a division by zero";
    return fp.div0 ? "div0" : nullptr;
  }
  *why = "from finite inputs";
  return fp.oflo ? "oflo" : nullptr;
}

// Checks `t`, which the kernel produced (`what`: "output 0", "variable
// 'w'"); the inputs are scanned once, at the first non-finite element.
template <typename T>
absl::Status CheckValues(const FloatingPointBehaviour& fp,
                         const KernelContext& ctx, const Tensor& t,
                         bool overflowed, const std::string& what,
                         bool* scanned, InputFacts* in) {
  const T* p = t.data<T>();
  const int64_t n = t.NumElements();
  for (int64_t i = FirstNonFinite(p, n, 0); i >= 0;
       i = FirstNonFinite(p, n, i + 1)) {
    if (!*scanned) {
      *in = ScanInputs(ctx);
      *scanned = true;
    }
    const float v = ToFloat(p[i]);
    const char* why = "";
    const char* trap = Classify(fp, ctx, *in, overflowed, v, &why);
    if (trap == nullptr) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "floating-point exception (", trap, "): ", ctx.node().DebugName(), " ",
        what, " element ", i, " is ",
        std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"), " ", why));
  }
  return absl::OkStatus();
}

absl::Status CheckTensor(const FloatingPointBehaviour& fp,
                         const KernelContext& ctx, const Tensor& t,
                         bool overflowed, const std::string& what,
                         bool* scanned, InputFacts* in) {
  if (!t.valid()) return absl::OkStatus();
  if (t.dtype() == DType::kFloat32) {
    return CheckValues<float>(fp, ctx, t, overflowed, what, scanned, in);
  }
  if (t.dtype() == DType::kFloat16) {
    return CheckValues<half>(fp, ctx, t, overflowed, what, scanned, in);
  }
  return absl::OkStatus();
}

// The variable an op that writes one (ResourceAccess::kWrite on input 0:
// assignments, optimizer updates) names in its "variable" attribute (the
// builders' convention, ops/state/handle.h), if it lives on this device.
std::shared_ptr<VariableResource> WrittenVariable(const KernelContext& ctx) {
  const Node& n = ctx.node();
  if (n.op_def().resource_access() != ResourceAccess::kWrite ||
      ctx.env().resources == nullptr) {
    return nullptr;
  }
  auto it = n.attrs().find("variable");
  if (it == n.attrs().end()) return nullptr;
  const std::string* name = it->second.get<std::string>();
  return name == nullptr ? nullptr : ctx.env().resources->FindVariable(*name);
}

}  // namespace

absl::Status CheckFloatingPointTraps(const FloatingPointBehaviour& fp,
                                     KernelContext& ctx) {
  // Nodes running sub-programs (loops) had their bodies' kernels checked;
  // ops without float inputs (constants, feeds, variable reads) compute
  // nothing that could trap: the data they produce is what it is.
  if (ctx.node().op_def().sub_programs() || !HasFloatInput(ctx)) {
    return absl::OkStatus();
  }
  bool scanned = false;
  InputFacts in;
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    RETURN_IF_ERROR(CheckTensor(fp, ctx, *ctx.mutable_output(k),
                                ctx.half_overflowed(k),
                                absl::StrCat("output ", k), &scanned, &in));
  }
  // What an update wrote into its variable counts as its result too.
  if (std::shared_ptr<VariableResource> var = WrittenVariable(ctx)) {
    absl::StatusOr<Tensor> value = var->Read();  // Not while offloaded.
    if (value.ok()) {
      RETURN_IF_ERROR(CheckTensor(fp, ctx, *value, ctx.half_overflowed_any(),
                                  absl::StrCat("variable '", var->name(), "'"),
                                  &scanned, &in));
    }
  }
  return absl::OkStatus();
}

}  // namespace ipuflow
