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
  const CpuFeatures& f = DetectedCpuFeatures();
  if (f.avx512f) absl::StrAppend(&isa, " AVX-512F");
  if (f.avx2) absl::StrAppend(&isa, " AVX2");
  if (f.fma) absl::StrAppend(&isa, " FMA");
  if (isa.empty()) isa = " (no AVX)";
  return absl::StrCat(model, " (", std::thread::hardware_concurrency(),
                      " logical CPUs); ISA:", isa,
                      "; kernels: ", IsaDescription());
}

}  // namespace ipuflow
