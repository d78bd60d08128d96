// What a built pipeline (pipeline_internal.h) asks the compiler and the
// device layer to run, before any system is known: each stage part's
// forward and backward program and the weight update as the frame node's
// sub-programs (compiled by Program::Compile as a loop's body is, so the
// memory plan, run counters and reports reach them), with how their feeds
// and fetches are laid out, and the schedule table lowered to per-IPU work
// lists (core/ipu/work_lists.h) with every channel's capacity. A function
// of the built pipeline and IPUConfig.allow_recompute (ProgramSpec's
// recompute). The device layer runs it (core/ipu/work_list_program.h):
// nothing in pipelining/ runs an item. Internal to pipelining/.
#ifndef IPUFLOW_PIPELINING_PIPELINE_PROGRAMS_H_
#define IPUFLOW_PIPELINING_PIPELINE_PROGRAMS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ipu/work_list_program.h"
#include "core/program_spec.h"
#include "pipelining/pipeline_internal.h"

namespace ipuflow::pipelining {

namespace internal {
// Bytes of one value of `o`'s (static) shape.
int64_t Bytes(const Output& o);
// The name of a FIFO: "act/<stage>/<from part>/<to part>", "stash/s/p/0"...
std::string Key(const char* kind, int a, int b, int c = 0);
}  // namespace internal

// The roles of the weight update among the frame node's sub-programs, and
// of the programs around it that load offloaded optimizer state before it
// and store it after (the RemoteState's nodes, pipeline_internal.h).
inline constexpr char kWeightUpdateRole[] = "weight update";
inline constexpr char kLoadStateRole[] = "offloaded state load";
inline constexpr char kStoreStateRole[] = "offloaded state store";

// One stage part's programs and the layout of their feeds and fetches.
struct PartProgram {
  const PartDef* def = nullptr;
  std::string forward_role;   // "stage 2 forward", "stage 2.1 forward".
  std::string backward_role;  // Empty: no backward program.
  ProgramSpec forward_spec;
  ProgramSpec backward_spec;
  std::vector<int> fed_args;  // Arguments the part reads, fed.
  // Stage 0's first part: its InfeedDequeue node takes the element, which
  // its forward fetches for the stage's other parts.
  bool takes_element = false;
  bool enqueues = false;        // Its forward runs the OutfeedEnqueue node.
  std::vector<Output> stash;    // Forward values the backward is fed.
  std::vector<int> dy_outputs;  // Outputs with a dy placeholder.
  std::vector<int> grad_args;   // Arguments whose gradient is fetched.
  int64_t stash_bytes = 0;      // One micro-batch.
  int64_t output_bytes = 0;     // One micro-batch's outputs.
  int64_t grad_bytes = 0;       // One micro-batch's float outputs.
};

// One work-list item of one part (a WorkListItem's tag indexes these):
// what the report says it was.
struct PartItem {
  WorkItem item;
  int part = 0;
};

struct PipelineLayout {
  bool recompute = false;
  int num_ipus = 0;                             // One replica's.
  std::vector<std::vector<PartProgram>> parts;  // [stage][part]
  bool has_weight_update = false;
  ProgramSpec weight_update;  // Fed the ZeRO-1 shards load_state fetches.
  bool offloads = false;      // load_state and store_state run around it.
  ProgramSpec load_state;
  ProgramSpec store_state;
  // What the device layer runs (core/ipu/work_list_program.h): per IPU,
  // the table's items in table order, each with the channels it pops and
  // pushes and how its program's feeds and its pushes are laid out; the
  // weight update as the epilogue. `items` by WorkListItem::tag; each
  // channel's capacity.
  std::shared_ptr<const WorkListSpec> work;
  std::vector<PartItem> items;
  std::map<std::string, int> capacities;
};

// InvalidArgument for a stage placed outside [0, kMaxIpus).
absl::StatusOr<std::shared_ptr<const PipelineLayout>> LayOut(
    const BuiltPipeline& b, bool recompute);

// The frame node's sub-programs: every part's forward (holding its stash
// and incoming FIFOs at capacity on its IPU) and backward, then the weight
// update (with offloading, between the load and the store of the state);
// each on the replica's own IPUs.
std::vector<SubProgramSpec> SubProgramSpecs(const BuiltPipeline& b,
                                            const PipelineLayout& layout);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_PROGRAMS_H_
