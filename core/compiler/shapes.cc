#include "core/compiler/shapes.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"

namespace ipuflow::compiler {

absl::StatusOr<ValueTypes> InferShapes(const Graph& graph,
                                       const ProgramSpec& spec,
                                       const NodeOrder& order,
                                       const Values& values) {
  ValueTypes t;
  t.dtypes.assign(values.num_values, DType::kInvalid);
  t.shapes.assign(values.num_values, TensorShape());
  for (size_t i = 0; i < spec.feeds.size(); ++i) {
    t.dtypes[values.feed_values[i]] = spec.feeds[i].dtype();
    t.shapes[values.feed_values[i]] = spec.feed_shapes[i];
  }
  for (int pos = 0; pos < order.size(); ++pos) {
    const Node* n = order.nodes[pos];
    const std::vector<int>& inputs = values.inputs[pos];
    std::vector<DType> in_dtypes;
    std::vector<TensorShape> in_shapes;
    std::vector<const Tensor*> in_constants;
    for (int i = 0; i < n->num_inputs(); ++i) {
      in_dtypes.push_back(t.dtypes[inputs[i]]);
      in_shapes.push_back(t.shapes[inputs[i]]);
      const Node* src = n->input(i).node;
      const ConstantValueFn& constant = src->op_def().constant_value();
      in_constants.push_back(constant ? &constant(*src) : nullptr);
    }
    ShapeContext ctx(&n->op_def(), n->name(), &in_dtypes, &in_shapes,
                     &in_constants, &n->attrs(), &graph);
    if (n->op_def().shape_fn()) {
      absl::Status s = n->op_def().shape_fn()(ctx);
      if (!s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat(n->DebugName(), ": ", s.message()));
      }
    }
    if (static_cast<int>(ctx.output_dtypes().size()) != n->num_outputs()) {
      return absl::InternalError(absl::StrCat(
          n->DebugName(), ": shape function changed the number of outputs"));
    }
    for (int k = 0; k < n->num_outputs(); ++k) {
      // Concrete feed shapes can make sizes that no tensor may have.
      if (absl::Status s = ValidateShape(ctx.output_shapes()[k]); !s.ok()) {
        return absl::ResourceExhaustedError(
            absl::StrCat(n->DebugName(), ": output ", k, ": ", s.message()));
      }
      t.dtypes[values.first_output[pos] + k] = ctx.output_dtypes()[k];
      t.shapes[values.first_output[pos] + k] = ctx.output_shapes()[k];
    }
  }
  return t;
}

}  // namespace ipuflow::compiler
