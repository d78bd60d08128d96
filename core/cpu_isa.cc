#include "core/cpu_isa.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ipuflow {
namespace {

constexpr char kEnv[] = "IPUFLOW_MAX_ISA";

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

struct Choice {
  CpuIsa isa;
  bool capped;
  std::string env;  // The variable's value, empty when unset.
};

Choice Choose() {
  Choice c{DetectedIsa(), false, ""};
  const char* env = std::getenv(kEnv);
  if (env == nullptr || *env == '\0') return c;
  c.env = env;
  std::optional<CpuIsa> cap = ParseIsa(env);
  if (!cap) {
    std::fprintf(stderr,
                 "ipuflow: %s=\"%s\" is not \"avx2\" or \"avx512\"; "
                 "capping kernels to avx2\n",
                 kEnv, env);
    cap = CpuIsa::kAvx2;
  }
  if (*cap < c.isa) {
    c.isa = *cap;
    c.capped = true;
  }
  return c;
}

const Choice& TheChoice() {
  static const Choice* const choice = new Choice(Choose());
  return *choice;
}

}  // namespace

const CpuFeatures& DetectedCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

CpuIsa DetectedIsa() {
  const CpuFeatures& f = DetectedCpuFeatures();
  return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl ? CpuIsa::kAvx512
                                                             : CpuIsa::kAvx2;
}

std::optional<CpuIsa> ParseIsa(std::string_view name) {
  std::string lower(name);
  absl::AsciiStrToLower(&lower);
  if (lower == "avx2") return CpuIsa::kAvx2;
  if (lower == "avx512") return CpuIsa::kAvx512;
  return std::nullopt;
}

CpuIsa UsedIsa() { return TheChoice().isa; }

bool IsaCapped() { return TheChoice().capped; }

const char* IsaName(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 ? "avx512" : "avx2";
}

std::string IsaDescription() {
  const CpuFeatures& f = DetectedCpuFeatures();
  std::string cpu;
  if (f.avx512f) {
    absl::StrAppend(&cpu, "AVX-512F", f.avx512bw ? "/BW" : "",
                    f.avx512dq ? "/DQ" : "", f.avx512vl ? "/VL" : "", " ");
  }
  absl::StrAppend(&cpu, f.avx2 ? "AVX2 " : "", f.fma ? "FMA " : "",
                  f.f16c ? "F16C" : "");
  const Choice& c = TheChoice();
  const std::string env =
      c.env.empty() ? std::string(" unset") : absl::StrCat("=", c.env);
  return absl::StrCat(IsaName(c.isa), " (CPU: ", cpu, "; ", kEnv, env,
                      c.capped ? ", capped" : "", ")");
}

}  // namespace ipuflow
