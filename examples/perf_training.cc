#include "examples/perf_training.h"

#include "core/ipu/ipu_strategy.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/sub.h"

namespace ipuflow::examples {

absl::StatusOr<PerfTrainingResult> RunPerfTraining(IPUSystem* system,
                                                   int iterations) {
  using feeds::Element;
  // The dataset: one constant element [800], mapped to (x, x), forever.
  const Tensor x = Tensor::Filled(DType::kFloat32, {800}, 1.0);
  feeds::ElementSpec pair{{DType::kFloat32, DType::kFloat32}, {{800}, {800}}};
  feeds::DatasetPtr dataset = feeds::FromTensors({x})
                                  ->Map(
                                      [](Element e) -> absl::StatusOr<Element> {
                                        return Element{e[0], e[0]};
                                      },
                                      1, pair)
                                  ->Repeat();
  ASSIGN_OR_RETURN(auto infeed, feeds::IPUInfeedQueue::Create(dataset));
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());

  // The device program: Repeat(iterations, body) with a counter carried.
  Scope root = Scope::NewRootScope();
  auto body = [&](const Scope& s, const std::vector<Output>& args) {
    const Output& counter = args[0];
    const Output& x1 = args[1];
    const Output& x2 = args[2];
    Output d1 = ops::Add(s, x1, x2);
    Output d2 = ops::Sub(s, x1, x2);
    outfeed->Enqueue(s, {{"d1", d1}, {"d2", d2}});
    return std::vector<Output>{ops::Add(s, counter, ops::Const(s, 1.0f))};
  };
  ASSIGN_OR_RETURN(loops::Loop loop,
                   loops::Repeat(root, iterations, body,
                                 {ops::Const(root, 0.0f)}, infeed.get()));

  IPUStrategy strategy(system);
  ASSIGN_OR_RETURN(std::vector<Tensor> result,
                   strategy.Run(*root.graph(), loop.outputs));
  PerfTrainingResult out;
  out.counter = result[0];
  ASSIGN_OR_RETURN(out.outfeed, outfeed->Dequeue());
  return out;
}

}  // namespace ipuflow::examples
