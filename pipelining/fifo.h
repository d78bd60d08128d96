// StageFifo: the bounded FIFO between two pipeline work items: activations
// from a forward stage to the next, gradients from a backward stage to the
// previous one, and a stage's activation stash (forward -> its backward).
// It is the device layer's one bounded queue (core/ipu/bounded_queue.h)
// carrying StageMessages: each holds the virtual time at which its
// producer finished (pipeline_report.h), so the consumer's virtual clock
// honours the dependency.
//
//   StageFifo fifo(/*capacity=*/2, "act/0/0/0");
//   RETURN_IF_ERROR(fifo.Push({values, vend}));          // producer IPU
//   ASSIGN_OR_RETURN(StageMessage m, fifo.Pop());        // consumer IPU
//
// Why bounded and why it cannot deadlock: every IPU runs its items in a
// fixed order, so the pipeline is a Kahn process network; with blocking
// reads and writes its behaviour does not depend on timing. The runtime
// sizes each FIFO to the peak occupancy of one valid execution (the schedule
// table run step by step), so that execution never blocks a writer, and
// hence no execution does.
#ifndef IPUFLOW_PIPELINING_FIFO_H_
#define IPUFLOW_PIPELINING_FIFO_H_

#include <vector>

#include "core/ipu/bounded_queue.h"
#include "core/tensor.h"

namespace ipuflow::pipelining {

struct StageMessage {
  std::vector<Tensor> values;
  double virtual_time = 0;  // Producer's virtual end time, seconds.
};

using StageFifo = BoundedQueue<StageMessage>;

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_FIFO_H_
