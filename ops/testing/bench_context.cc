// Linked into the op benchmarks (alwayslink): their reports' context lines
// name the machine (CPU, ISA, the kernels ipuflow chose) and the ISA
// oneDNN runs, so a figure always says where it was measured.
#include "benchmark/benchmark.h"
#include "core/machine_info.h"
#include "ops/onednn/onednn.h"

namespace ipuflow::ops {
namespace {

const bool kContext = [] {
  benchmark::AddCustomContext("machine", MachineDescription());
  benchmark::AddCustomContext("onednn", onednn::Description());
  return true;
}();

}  // namespace
}  // namespace ipuflow::ops
