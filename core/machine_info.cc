#include "core/machine_info.h"

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/cpu_isa.h"

namespace ipuflow {

std::string MachineDescription() {
  std::string model = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  std::string isa;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) absl::StrAppend(&isa, " AVX-512F");
  if (__builtin_cpu_supports("avx2")) absl::StrAppend(&isa, " AVX2");
  if (__builtin_cpu_supports("fma")) absl::StrAppend(&isa, " FMA");
#endif
  if (isa.empty()) isa = " (no AVX)";
  return absl::StrCat(model, " (", std::thread::hardware_concurrency(),
                      " logical CPUs); ISA:", isa,
                      "; kernels: ", IsaDescription());
}

}  // namespace ipuflow
