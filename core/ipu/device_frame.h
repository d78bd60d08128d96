// DeviceFrame: a computation that one node of a device program runs over
// several IPUs of each replica at once (a pipeline: its stages' work lists,
// core/ipu/work_lists.h). The node is an ordinary graph node (the
// PipelineFrame op, ops/control/pipeline_frame.h, beside Repeat); the frame
// is the host resource it uses (Graph::AddHostResource), which is how the
// device layer finds it without knowing any op by name:
//
//   strategy.Compile(graph, {}, {frame_node})   // a DeviceProgram:
//     - Program::Compile compiles SubProgramSpecs() as the frame node's
//       sub-programs (as a loop's body; once per replica's program), on
//       the replica's IPUs: the plan, the one memory check and report,
//       and whatever walks a program's sub-programs reach them;
//     - replicas of ipus_per_replica() IPUs each (ReplicationFactor);
//     - RemoteState::Plan for the offloaded optimizer state its
//       sub-programs' nodes load and store (as a loop's), then
//       Lower(system, replicas, group, ipus): the frame lays out its work
//       lists for every replica;
//   Execute                                     // replica r's kernel, on
//     - RunReplica(env, inputs, programs)       // IPU r*S's thread, with
//                                               // its node's sub-programs
//
// A lowering belongs to one device program: it is keyed by the program's
// CollectiveGroup (env.collectives at run time) and dropped by Release when
// the program is destroyed, so several programs of one graph coexist.
//
// Ownership: the frame is owned by what built it (Pipeline); the graph
// and the programs hold weak references. Thread safety: Lower and Release
// from host threads; RunReplica from each replica's first IPU thread,
// concurrently for different replicas.
#ifndef IPUFLOW_CORE_IPU_DEVICE_FRAME_H_
#define IPUFLOW_CORE_IPU_DEVICE_FRAME_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/graph.h"
#include "core/ipu/collective_group.h"
#include "core/ipu/ipu_system.h"
#include "core/kernel.h"
#include "core/memory_plan.h"
#include "core/program.h"
#include "core/tensor.h"

namespace ipuflow {

class DeviceFrame : public HostResource {
 public:
  // Names the frame in errors and reports ("pipeline 'p'").
  virtual std::string name() const = 0;
  // The IPUs one replica of the frame uses.
  virtual int ipus_per_replica() const = 0;
  // The programs the frame node's kernel runs, for the enclosing
  // program's compile options (recompute); each with own_ipus.
  virtual absl::StatusOr<std::vector<SubProgramSpec>> SubProgramSpecs(
      const ProgramSpec& enclosing) const = 0;
  // Lowers the frame for `replicas` replicas on `system` (replica r on
  // IPUs [r*S, r*S + S)), for the device program whose collectives are
  // `group`. `ipus`: what each IPU of a replica holds, from the program's
  // plan, offloaded state placed (a frame offloads through a RemoteState
  // its sub-programs use); the caller then checks it against the budgets
  // (CheckIpuMemory).
  virtual absl::Status Lower(IPUSystem* system, int replicas,
                             CollectiveGroup* group,
                             std::vector<IpuMemory>* ipus) = 0;
  // Forgets the lowering for `group` (its program is being destroyed).
  virtual void Release(CollectiveGroup* group) = 0;
  // Runs replica env.replica of the lowering for env.collectives, with the
  // values of the frame node's inputs and the node's sub-programs (those
  // of the replica's program).
  virtual absl::Status RunReplica(const RunEnv& env,
                                  const std::vector<Tensor>& inputs,
                                  SubPrograms& programs) = 0;
  absl::Status Prepare(int num_replicas, bool training) override {
    return absl::OkStatus();
  }
  std::string DebugString() const override { return name(); }
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_DEVICE_FRAME_H_
