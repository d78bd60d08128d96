// The names of the graph collections (Graph::AddToCollection) that layers
// other than the one that fills them read: one place, so that core/ can
// read what optimizers/ write without depending on it.
#ifndef IPUFLOW_CORE_GRAPH_COLLECTIONS_H_
#define IPUFLOW_CORE_GRAPH_COLLECTIONS_H_

namespace ipuflow {

// Gradient accumulators: variables the memory report counts as
// accumulators, not optimizer state (memory_plan.h).
inline constexpr char kGradientAccumulatorsCollection[] =
    "gradient_accumulators";

// The accumulation counters' Variable nodes (one per gradient-accumulation
// wrapper, optimizers/gradient_accumulation.h): 0 at a weight-update
// boundary, which is where checkpoints may be taken
// (core/checkpoint/training_state.h refuses the others).
inline constexpr char kAccumulationCountersCollection[] =
    "gradient_accumulation_counters";

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_GRAPH_COLLECTIONS_H_
