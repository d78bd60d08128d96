// The CPU's instruction sets, detected once, and the one ISA ipuflow's
// kernels use: the widest the CPU has, capped by the environment variable
// IPUFLOW_MAX_ISA ("avx2" or "avx512"). The build's baseline is x86-64-v3
// (AVX2, FMA, F16C); kernels that measured faster with AVX-512 carry a
// second variant and pick one through a function pointer set on first use:
//
//   using ReluFn = void (*)(const float*, float*, int64_t);
//   const ReluFn relu = ipuflow::UsedIsa() == ipuflow::CpuIsa::kAvx512
//                           ? ReluAvx512 : ReluAvx2;
//
// The same cap applies to oneDNN (ops/onednn/onednn.cc passes it to
// dnnl::set_max_cpu_isa before its first primitive), so
// `IPUFLOW_MAX_ISA=avx2` runs a whole program as on an AVX2-only CPU.
// An unknown value caps to avx2 (the safe reading) and says so on stderr.
//
// Thread safety: every function may be called from any thread; the values
// are computed once (function-local statics) and never change.
#ifndef IPUFLOW_CORE_CPU_ISA_H_
#define IPUFLOW_CORE_CPU_ISA_H_

#include <optional>
#include <string>
#include <string_view>

namespace ipuflow {

// The ISA levels kernels are compiled for, narrowest first.
enum class CpuIsa {
  kAvx2,    // x86-64-v3: AVX2, FMA, F16C (the build's baseline).
  kAvx512,  // x86-64-v4's AVX-512 F, BW, DQ and VL.
};

// What cpuid says, read once.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
};
const CpuFeatures& DetectedCpuFeatures();

// The widest CpuIsa the CPU supports (kAvx512 needs all four AVX-512
// subsets above).
CpuIsa DetectedIsa();

// "avx2" / "avx512" (case-insensitive) as a CpuIsa; nullopt for others.
std::optional<CpuIsa> ParseIsa(std::string_view name);

// min(DetectedIsa(), IPUFLOW_MAX_ISA): the ISA every dispatched kernel and
// oneDNN use in this process. Read once, on the first call.
CpuIsa UsedIsa();

// True if the cap lowered the ISA (the override is in effect).
bool IsaCapped();

// "avx2" or "avx512".
const char* IsaName(CpuIsa isa);

// For reports: "avx512 (CPU: AVX-512F/BW/DQ/VL AVX2 FMA F16C; IPUFLOW_MAX_ISA
// unset)".
std::string IsaDescription();

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_CPU_ISA_H_
