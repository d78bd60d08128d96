#include "ops/control/pipeline_frame.h"

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/program.h"

namespace ipuflow::ops {
namespace {

absl::StatusOr<std::shared_ptr<DeviceFrame>> FindFrame(const Node& node) {
  const std::string id = node.attr<std::string>("frame");
  auto frame = std::dynamic_pointer_cast<DeviceFrame>(
      node.graph()->FindHostResource(id));
  if (frame == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the frame '", id, "' is gone (its pipeline was destroyed)"));
  }
  return frame;
}

// The frame's programs: the compiler compiles them (SetSubPrograms).
absl::StatusOr<std::vector<SubProgramSpec>> FramePrograms(
    const Node& node, absl::Span<const TensorShape>,
    const ProgramSpec& enclosing) {
  ASSIGN_OR_RETURN(std::shared_ptr<DeviceFrame> frame, FindFrame(node));
  return frame->SubProgramSpecs(enclosing);
}

absl::Status PipelineFrameKernel(KernelContext& ctx) {
  absl::StatusOr<std::shared_ptr<DeviceFrame>> frame = FindFrame(ctx.node());
  if (!frame.ok()) {
    return ctx.Error(frame.status().code(), frame.status().message());
  }
  auto* programs = dynamic_cast<SubPrograms*>(ctx.state().get());
  if (programs == nullptr || programs->empty()) {
    return ctx.Error(absl::StatusCode::kFailedPrecondition,
                     "the frame's programs were not compiled with the "
                     "program (the shapes of its inputs must be known)");
  }
  std::vector<Tensor> inputs;
  for (int i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input(i));
  // The stages' lists run on this replica's IPUs; this thread (the
  // replica's first IPU) runs its own list and waits for the others.
  return (*frame)->RunReplica(ctx.env(), inputs, *programs);
}

REGISTER_OP("PipelineFrame")
    .VariadicInput("inputs")
    .RequiredAttr("frame", AttrType::kString)
    .SetStateful()
    .SetShapeFn([](ShapeContext&) { return absl::OkStatus(); })
    .SetKernel(PipelineFrameKernel)
    .SetSubPrograms(FramePrograms)
    .NotDifferentiable(
        "a pipeline differentiates its stages itself (optimizer_function)");

}  // namespace

absl::StatusOr<Node*> PipelineFrame(const Scope& scope, const std::string& id,
                                    std::shared_ptr<DeviceFrame> frame,
                                    const std::vector<Output>& inputs) {
  RETURN_IF_ERROR(scope.status());
  NodeSpec spec;
  spec.op = "PipelineFrame";
  spec.name = scope.graph()->UniqueName(
      scope.prefix().empty() ? "frame"
                             : absl::StrCat(scope.prefix(), "/frame"));
  spec.inputs = inputs;
  spec.attrs["frame"] = id;
  spec.ipu = scope.ipu();
  spec.block = scope.block();
  absl::StatusOr<Node*> added = scope.graph()->AddNode(std::move(spec));
  if (!added.ok()) {
    scope.UpdateStatus(added.status());
    return added.status();
  }
  scope.graph()->AddHostResource(id, frame, *added);
  return *added;
}

}  // namespace ipuflow::ops
