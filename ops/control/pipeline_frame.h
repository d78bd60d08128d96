// The pipeline frame: one node that runs a pipeline's stages over several
// IPUs of each replica, beside Repeat and WhileLoop. pipelining::Pipeline
// builds it (the stages are nodes of the same graph, as a loop's body is);
// its kernel asks the device layer's DeviceFrame (core/ipu/device_frame.h),
// which pipelining/ lowered to per-IPU work lists when the program
// compiled, to run the replica it is on. A graph with a frame compiles like
// any loop:
//
//   ASSIGN_OR_RETURN(auto pipeline,
//                    pipelining::Pipeline::Create(scope, options));
//   ASSIGN_OR_RETURN(
//       DeviceProgram* exe,
//       strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
//   RETURN_IF_ERROR(exe->Execute({{}}, &results));  // every replica
//
// The frame's stage parts (forward, backward) and weight update are the
// node's sub-programs (SetSubPrograms, DeviceFrame::SubProgramSpecs),
// compiled with the enclosing program as a loop's body is. The frame's
// inputs are the pipeline's `inputs` (computed by the program, or fed); it
// has no outputs (results leave by the outfeed) and is stateful.
// Errors: FailedPrecondition when the frame's owner (the Pipeline) is gone
// or the frame was not lowered for this program.
#ifndef IPUFLOW_OPS_CONTROL_PIPELINE_FRAME_H_
#define IPUFLOW_OPS_CONTROL_PIPELINE_FRAME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/device_frame.h"
#include "core/scope.h"

namespace ipuflow::ops {

// Adds the frame node `name` running `frame` with `inputs`, and registers
// the frame in the graph's host resources under `id` (unique in the
// graph). The graph keeps a weak reference: the caller owns the frame.
absl::StatusOr<Node*> PipelineFrame(const Scope& scope, const std::string& id,
                                    std::shared_ptr<DeviceFrame> frame,
                                    const std::vector<Output>& inputs);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_CONTROL_PIPELINE_FRAME_H_
