// The Repeat and WhileLoop ops (built by ops/control/loops.h) and the _Arg
// op their bodies read loop-carried values from. The loop's frames (body,
// condition) go to the compiler as sub-programs (SetSubPrograms), which
// compiles each once, for the loop's input shapes, plans its memory as part
// of the enclosing program's and hands it to this kernel (SubPrograms in
// the node's state): the planned program is the one that runs, and runs
// and iterations never re-plan. Only a loop whose input shapes were unknown
// at compile time compiles its frames here, on its first run.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/program.h"

namespace ipuflow::loops {
namespace {

absl::StatusOr<Output> ParseOutput(const Graph& g, const std::string& name) {
  std::pair<std::string, std::string> parts = absl::StrSplit(name, ':');
  Node* n = g.FindNode(parts.first);
  int index = 0;
  if (n == nullptr || !absl::SimpleAtoi(parts.second, &index) || index < 0 ||
      index >= n->num_outputs()) {
    return absl::NotFoundError(absl::StrCat("no output '", name, "'"));
  }
  return Output(n, index);
}

// One frame's program spec: its args and the captured outer values are fed
// (with `input_shapes`, the loop's), its results fetched, its targets run.
absl::StatusOr<ProgramSpec> FrameSpec(
    const Node& loop, const std::string& prefix,
    absl::Span<const TensorShape> input_shapes) {
  const Graph& g = *loop.graph();
  const int nv = static_cast<int>(loop.attr<int64_t>("num_loop_vars"));
  ProgramSpec spec;
  const auto& args = loop.attr<std::vector<std::string>>(prefix + "_args");
  for (size_t i = 0; i < args.size(); ++i) {
    Node* a = g.FindNode(args[i]);
    if (a == nullptr)
      return absl::NotFoundError(absl::StrCat("no arg ", args[i]));
    spec.feeds.push_back(Output(a));
    spec.feed_shapes.push_back(input_shapes[i]);
  }
  for (int k = nv; k < loop.num_inputs(); ++k) {
    spec.feeds.push_back(loop.input(k));
    spec.feed_shapes.push_back(input_shapes[k]);
  }
  std::vector<std::string> results;
  if (prefix == "cond") {
    results.push_back(loop.attr<std::string>("cond_result"));
  } else {
    results = loop.attr<std::vector<std::string>>("body_results");
  }
  for (const std::string& r : results) {
    ASSIGN_OR_RETURN(Output o, ParseOutput(g, r));
    spec.fetches.push_back(o);
  }
  for (const std::string& t :
       loop.attr<std::vector<std::string>>(prefix + "_targets")) {
    Node* n = g.FindNode(t);
    if (n == nullptr) return absl::NotFoundError(absl::StrCat("no node ", t));
    spec.targets.push_back(n);
  }
  return spec;
}

// The loop's frames: the compiler compiles them (SetSubPrograms).
absl::StatusOr<std::vector<SubProgramSpec>> LoopFrames(
    const Node& loop, absl::Span<const TensorShape> input_shapes,
    const ProgramSpec& /*enclosing: the compiler applies its options*/) {
  std::vector<SubProgramSpec> frames;
  for (const char* prefix : {"cond", "body"}) {
    if (std::string(prefix) == "cond" && !loop.has_attr("cond_result"))
      continue;
    ASSIGN_OR_RETURN(ProgramSpec spec, FrameSpec(loop, prefix, input_shapes));
    frames.push_back({prefix, std::move(spec)});
  }
  return frames;
}

// The frames' programs the compiler compiled for this loop, or, where it
// could not (input shapes unknown until now), compiled here for the shapes
// of this first run.
absl::StatusOr<SubPrograms*> FramePrograms(KernelContext& ctx) {
  std::unique_ptr<KernelState>& slot = ctx.state();
  auto* subs = dynamic_cast<SubPrograms*>(slot.get());
  if (subs != nullptr && !subs->empty()) return subs;
  if (subs == nullptr) {  // A kernel context without the compiler's state.
    slot = std::make_unique<SubPrograms>(/*fuse=*/true);
    subs = static_cast<SubPrograms*>(slot.get());
  }
  const Node& loop = ctx.node();
  std::vector<TensorShape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    shapes.push_back(ctx.input(i).shape());
  absl::StatusOr<std::vector<SubProgramSpec>> frames =
      LoopFrames(loop, shapes, ProgramSpec());
  if (!frames.ok())
    return ctx.Error(frames.status().code(), frames.status().message());
  std::vector<std::unique_ptr<Program>> programs;  // All or none are kept.
  for (SubProgramSpec& frame : *frames) {
    frame.spec.fuse = subs->fuse();
    absl::StatusOr<std::unique_ptr<Program>> p =
        Program::Compile(*loop.graph(), frame.spec);
    if (!p.ok()) {
      return absl::Status(p.status().code(),
                          absl::StrCat(loop.DebugName(), " ", frame.role, ": ",
                                       p.status().message()));
    }
    programs.push_back(*std::move(p));
  }
  for (size_t i = 0; i < programs.size(); ++i) {
    subs->Add((*frames)[i].role, std::move(programs[i]));
  }
  return subs;
}

absl::Status LoopKernel(KernelContext& ctx) {
  const Node& loop = ctx.node();
  ASSIGN_OR_RETURN(SubPrograms* const frames, FramePrograms(ctx));
  Program* const body = frames->Find("body");
  Program* const cond = frames->Find("cond");
  if (body == nullptr || (cond == nullptr && loop.has_attr("cond_result"))) {
    return ctx.Error(absl::StatusCode::kInternal,
                     "the loop's frames were not compiled");
  }
  const int nv = static_cast<int>(loop.attr<int64_t>("num_loop_vars"));
  const int64_t max_iterations = loop.op() == "Repeat"
                                     ? loop.attr<int64_t>("n")
                                     : loop.attr<int64_t>("maximum_iterations");
  // Bodies run in order on this thread: waiting here for inter-op tasks
  // could block the very pool thread those tasks need.
  RunEnv env = ctx.env();
  env.inter_op = nullptr;
  // The infeed elements of the iteration in progress: given back if a
  // cancel stops it (the destructor), handed to an enclosing loop's
  // iteration (or consumed) when it completes (core/taken_elements.h).
  TakenElements taken(ctx.env().taken);
  env.taken = &taken;
  auto stopped = [&taken](absl::Status s) {
    if (!absl::IsCancelled(s)) taken.Forget();
    return s;
  };
  std::vector<Tensor> feeds;
  for (int i = 0; i < ctx.num_inputs(); ++i) feeds.push_back(ctx.input(i));
  std::vector<Tensor> results;
  for (int64_t it = 0; max_iterations < 0 || it < max_iterations; ++it) {
    if (cond != nullptr) {
      absl::Status s = cond->Run(env, feeds, &results);
      if (!s.ok()) return stopped(s);
      if (!results[0].scalar<bool>()) break;
    }
    absl::Status s = body->Run(env, feeds, &results);
    if (!s.ok()) return stopped(s);
    taken.Commit();
    for (int i = 0; i < nv; ++i) feeds[i] = std::move(results[i]);
  }
  for (int i = 0; i < nv; ++i) ctx.set_output(i, feeds[i]);
  return absl::OkStatus();
}

// The checks a GraphDef needs (loops::Repeat builds consistent attributes):
// every name refers to a node added before this loop (so a loop can never
// target itself or a later node: no cycle), one arg and one body result per
// loop variable with its dtype, a bool scalar condition.
absl::Status CheckFrame(const ShapeContext& c, const std::string& prefix,
                        int64_t nv) {
  const Graph& g = *c.graph();
  ASSIGN_OR_RETURN(auto args,
                   c.attr<std::vector<std::string>>(prefix + "_args"));
  if (static_cast<int64_t>(args.size()) != nv) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", prefix, "_args' has ", args.size(),
                     " names but num_loop_vars is ", nv));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Node* a = g.FindNode(args[i]);
    if (a == nullptr || a->op() != "_Arg" ||
        a->output_dtype(0) != c.input_dtype(i) ||
        !a->output_shape(0).IsCompatibleWith(c.input_shape(i))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribute '", prefix, "_args'[", i, "] = \"", args[i],
          "\" must name an _Arg node defined before the loop, of ",
          DTypeName(c.input_dtype(i)), c.input_shape(i).DebugString()));
    }
  }
  std::vector<std::string> results;
  if (prefix == "cond") {
    ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("cond_result"));
    results.push_back(r);
  } else {
    ASSIGN_OR_RETURN(results, c.attr<std::vector<std::string>>("body_results"));
    if (static_cast<int64_t>(results.size()) != nv) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'body_results' has ", results.size(),
                       " names but num_loop_vars is ", nv));
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StatusOr<Output> o = ParseOutput(g, results[i]);
    const bool ok =
        o.ok() &&
        (prefix == "cond" ? o->dtype() == DType::kBool && o->shape().rank() == 0
                          : o->dtype() == c.input_dtype(i));
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix == "cond" ? "attribute 'cond_result'"
                           : absl::StrCat("attribute 'body_results'[", i, "]"),
          " = \"", results[i],
          "\" must name an output defined before the loop, ",
          prefix == "cond" ? "a bool scalar"
                           : absl::StrCat("of ", DTypeName(c.input_dtype(i)))));
    }
  }
  ASSIGN_OR_RETURN(auto targets,
                   c.attr<std::vector<std::string>>(prefix + "_targets"));
  for (size_t i = 0; i < targets.size(); ++i) {
    if (g.FindNode(targets[i]) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", prefix, "_targets'[", i, "] = \"",
                       targets[i], "\" names no node defined before the loop"));
    }
  }
  return absl::OkStatus();
}

absl::Status LoopShape(ShapeContext& c) {
  ASSIGN_OR_RETURN(int64_t nv, c.attr<int64_t>("num_loop_vars"));
  if (nv < 0 || nv > c.num_inputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute 'num_loop_vars' is ", nv, "; the loop has ", c.num_inputs(),
        " input(s) (loop variables, then captures)"));
  }
  if (c.op_name() == "Repeat") {
    ASSIGN_OR_RETURN(int64_t n, c.attr<int64_t>("n"));
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'n' is ", n, "; it must be >= 0"));
    }
  } else {
    ASSIGN_OR_RETURN(int64_t m, c.attr<int64_t>("maximum_iterations"));
    if (m < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'maximum_iterations' is ", m,
                       "; it must be >= 0 or -1 "
                       "(no limit)"));
    }
    RETURN_IF_ERROR(CheckFrame(c, "cond", nv));
  }
  RETURN_IF_ERROR(CheckFrame(c, "body", nv));
  for (int i = 0; i < nv; ++i)
    c.set_output(i, c.input_dtype(i), c.input_shape(i));
  return absl::OkStatus();
}

constexpr char kNoLoopGradient[] =
    "differentiate inside the loop body: gradients through a device loop are "
    "not supported";

REGISTER_OP("Repeat")
    .VariadicInput("inputs_and_captures")
    .RequiredAttr("n", AttrType::kInt)
    .RequiredAttr("num_loop_vars", AttrType::kInt)
    .RequiredAttr("body_args", AttrType::kStringList)
    .RequiredAttr("body_results", AttrType::kStringList)
    .RequiredAttr("body_targets", AttrType::kStringList)
    .SetStateful()
    .SetShapeFn(LoopShape)
    .SetKernel(LoopKernel)
    .SetSubPrograms(LoopFrames)
    .NotDifferentiable(kNoLoopGradient);

REGISTER_OP("WhileLoop")
    .VariadicInput("inputs_and_captures")
    .RequiredAttr("maximum_iterations", AttrType::kInt)
    .RequiredAttr("num_loop_vars", AttrType::kInt)
    .RequiredAttr("body_args", AttrType::kStringList)
    .RequiredAttr("body_results", AttrType::kStringList)
    .RequiredAttr("body_targets", AttrType::kStringList)
    .RequiredAttr("cond_args", AttrType::kStringList)
    .RequiredAttr("cond_result", AttrType::kString)
    .RequiredAttr("cond_targets", AttrType::kStringList)
    .SetStateful()
    .SetShapeFn(LoopShape)
    .SetKernel(LoopKernel)
    .SetSubPrograms(LoopFrames)
    .NotDifferentiable(kNoLoopGradient);

// A loop-carried value inside a body; always fed by the loop kernel.
REGISTER_OP("_Arg")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .RequiredAttr("index", AttrType::kInt)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
      ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
      c.set_output(0, dtype, shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) {
      return ctx.Error(absl::StatusCode::kInternal,
                       "loop argument was not fed");
    })
    .SetNeedsFeed()
    .NotDifferentiable("a loop argument has no inputs");

}  // namespace
}  // namespace ipuflow::loops
