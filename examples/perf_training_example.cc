// perf_training_example: the seed's section 6.1 in C++. Prints the loop
// counter and the dequeued outfeed dictionary.
//
//   ./bazelw run //examples:perf_training_example
#include <cstdio>

#include "examples/perf_training.h"

int main() {
  using namespace ipuflow;
  absl::StatusOr<std::unique_ptr<IPUSystem>> system =
      IPUSystem::Create(IPUConfig());
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<examples::PerfTrainingResult> result =
      examples::RunPerfTraining(system->get());
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("counter: %s\n", result->counter.DebugString().c_str());
  std::printf("outfeed:\n");
  for (size_t i = 0; i < result->outfeed.size(); ++i) {
    std::printf("  %s: %s\n", result->outfeed.names[i].c_str(),
                result->outfeed.tensors[i].DebugString(4).c_str());
  }
  std::printf("%s", (*system)->TransferReport().c_str());
  return 0;
}
