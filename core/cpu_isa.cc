#include "core/cpu_isa.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ipuflow {
namespace {

constexpr char kEnv[] = "IPUFLOW_MAX_ISA";

// Reads cpuid directly rather than through __builtin_cpu_supports: clang 14
// (the fuzz and sanitizer builds) rejects "f16c" there. A vector ISA counts
// only if the OS also saves its registers (XCR0 through xgetbv).
CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29);
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // XMM and YMM state.
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM.
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = os_avx && (b & (1u << 5));
  f.fma = os_avx && fma;
  f.f16c = os_avx && f16c;
  f.avx512f = os_avx512 && (b & (1u << 16));
  f.avx512dq = os_avx512 && (b & (1u << 17));
  f.avx512bw = os_avx512 && (b & (1u << 30));
  f.avx512vl = os_avx512 && (b & (1u << 31));
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
