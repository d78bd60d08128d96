// MachineDescription: the CPU a measurement ran on, for benchmark reports
// ("AMD EPYC 9R45 (2 logical CPUs); ISA: AVX-512F AVX2 FMA; kernels: avx512
// (...)", the last part the dispatch's choice, core/cpu_isa.h). The figures
// of docs/BENCHMARKS.md come from commands that print it, so a reader can
// tell whether a figure is comparable with their machine.
#ifndef IPUFLOW_CORE_MACHINE_INFO_H_
#define IPUFLOW_CORE_MACHINE_INFO_H_

#include <string>

namespace ipuflow {

std::string MachineDescription();

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_MACHINE_INFO_H_
