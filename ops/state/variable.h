// Variable: state that outlives one run. A Variable node outputs a handle (a
// scalar kResource tensor) to a VariableResource in the device's ResourceMgr;
// ReadVariable, Assign* and the Apply* optimizer ops take that handle.
//
//   VariableHandle w = ops::Variable(scope.WithOpName("w"),
//                                    ops::GlorotUniform(scope, {784, 10}));
//   Output y = ops::MatMul(scope, x, w.value);   // w.value: a ReadVariable
//   session.Initialize();                         // runs w.initializer
//
// Accesses to one variable within a run happen in the order their nodes were
// created (core/program.h): `w.value` is read before any update built later.
#ifndef IPUFLOW_OPS_STATE_VARIABLE_H_
#define IPUFLOW_OPS_STATE_VARIABLE_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

struct VariableOptions {
  // The variable's name in the ResourceMgr; empty: the node's name. Nodes
  // with the same shared_name (in any graph run on the same device) share
  // one variable.
  std::string shared_name;
  // Added to the "trainable_variables" collection (what optimizers train by
  // default).
  bool trainable = true;
};

// The Variable node alone: a handle to a variable of `dtype` and `shape`
// (fully defined), created on first use. Not added to any collection and
// never initialised: see the builder below.
Output Variable(const Scope& scope, DType dtype, const TensorShape& shape,
                const VariableOptions& options = {});

struct VariableHandle {
  Output handle;                // The Variable node's kResource output.
  Output value;                 // A ReadVariable created with the variable.
  Node* initializer = nullptr;  // Assign(handle, initial_value).
};

// A variable initialised to `initial_value` (whose shape must be fully
// defined): creates the Variable node (named after the scope, default
// "Variable"), an Assign "<name>/Assign" in the graph collection
// "initializers", and a ReadVariable "<name>/Read" as `value`; adds the
// Variable node to "variables" and, if trainable, "trainable_variables".
// The Variable and its initializer ignore the scope's control dependencies.
// On error records it in the scope and returns invalid outputs.
// True if `node` is a Variable (the op this file builds); false for null.
bool IsVariable(const Node* node);

VariableHandle Variable(const Scope& scope, Output initial_value,
                        const VariableOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_VARIABLE_H_
