// What Pipeline::Create() builds in the graph and pipeline_programs.h lays
// out for the device layer: for each stage part (a stage, or one of a group
// of concurrent stages), the values its forward and backward programs feed
// and fetch. Internal to pipelining/.
#ifndef IPUFLOW_PIPELINING_PIPELINE_INTERNAL_H_
#define IPUFLOW_PIPELINING_PIPELINE_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/ipu/remote_state.h"
#include "pipelining/pipeline.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

struct PartDef {
  int stage = 0;
  int part = 0;
  int ipu = 0;
  std::string name;  // "stage 2" or "stage 2.1" (concurrent).
  // One value per stage argument: a placeholder, or for stage 0's first
  // part the infeed element (args from `dequeued_from` on: the outputs of
  // its InfeedDequeue node, -1 if none); `arg_used[i]` iff the part reads
  // it.
  std::vector<Output> args;
  int dequeued_from = -1;
  std::vector<bool> arg_used;
  std::vector<Output> outputs;  // What the stage function returned.
  // Training. Forward values the backward is fed besides the used args,
  // without and with recomputation (stateful values only).
  std::vector<Output> stash;
  std::vector<Output> stash_recompute;
  // One dy placeholder per output (invalid for non-float outputs).
  std::vector<Output> grad_outputs;
  // d(loss)/d(arg) per argument (invalid: unused or not float).
  std::vector<Output> grad_args;
  // Accumulator updates (the backward program's targets) and the int32
  // scalar placeholder of the micro-batch index their scales are computed
  // from (optimizers::ReductionScales).
  std::vector<Node*> accumulate;
  Output micro_batch;
  bool has_backward = false;  // Something to differentiate.
  // Trainable variables the part reads (Variable nodes).
  std::vector<Node*> variables;
  // The last stage's last part runs the OutfeedEnqueue node; fed the other
  // last-stage parts' outputs (concurrent stages), which it pops.
  std::vector<Output> outfeed_feeds;
};

struct StageDef {
  std::vector<PartDef> parts;
  // Offset of each part's outputs in the stage's concatenated outputs.
  std::vector<int> output_offset;
  int num_outputs = 0;
};

struct BuiltPipeline {
  PipelineOptions options;
  std::shared_ptr<Graph> graph;
  bool training = false;
  std::vector<StageDef> stages;
  ScheduleTable table;
  // Training: the loss (fetched by the last stage's forward).
  Output loss;
  std::shared_ptr<optimizers::Optimizer> optimizer;
  // The weight update: apply the accumulated gradients, zero the
  // accumulators. Targets of one program over every IPU.
  std::vector<Node*> weight_update;
  std::vector<Node*> accumulators;  // Variable nodes.
  // Offloaded optimizer state (offload_weight_update_variables): the
  // device loops' mechanism, a RemoteState (core/ipu/remote_state.h) that
  // the device program plans and whose load and store nodes
  // (optimizers/offloaded_state.h) run in the weight update's first and
  // last programs (pipeline_programs.h). Its updates: one per weight whose
  // update may be sharded (below), then one per IPU for the rest of the
  // state there. Null when nothing is offloaded.
  std::shared_ptr<RemoteState> offloaded_state;
  std::vector<Node*> offload_loads;
  std::vector<Node*> offload_stores;
  // ZeRO-1 (replicated_optimizer_state_sharding with an elementwise
  // optimizer, ops/state/update_shard.h): per weight, the int32 [2] shard
  // that its gradient's reduce-scatter, its update ops and its all-gather
  // take (ops/collective/sharded_update.h): its load node's second output
  // (RemoteState::UpdateShardOf: {r, R} when the program sharded all the
  // weight's state, else {0, 1}), fetched by the load program and fed to
  // the weight update.
  struct WeightShard {
    Node* variable;
    Output shard;
  };
  std::vector<WeightShard> weight_shards;
  // The queues, as loops hold them: through the graph's host resources
  // (ids; empty: none). Stage 0's first part dequeues the infeed; the last
  // stage's last part enqueues `outfeed_values` (one push per micro-batch,
  // gradient_accumulation_count pushes per device iteration, summed with
  // accumulate_outfeed).
  std::string infeed_id;
  std::string outfeed_id;
  Node* outfeed_enqueue = nullptr;
  std::vector<Output> outfeed_values;
  // The PipelineFrame node (ops/control/pipeline_frame.h) that runs it all.
  Node* frame = nullptr;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_INTERNAL_H_
