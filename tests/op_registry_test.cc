// Every registered op is complete: a shape function, a kernel, and a
// gradient or a declared reason for having none. Linking //ops brings in
// every op family, so a new op is checked without being listed here.
#include "core/op_registry.h"

#include "gtest/gtest.h"

namespace ipuflow {
namespace {

TEST(OpRegistryTest, EveryOpHasShapeFnKernelAndGradientOrReason) {
  const auto ops = OpRegistry::Global()->ops();
  EXPECT_GT(ops.size(), 10u);
  for (const OpDef* def : ops) {
    EXPECT_TRUE(static_cast<bool>(def->shape_fn()))
        << "op '" << def->name() << "' has no shape function";
    EXPECT_TRUE(static_cast<bool>(def->kernel()))
        << "op '" << def->name() << "' has no kernel";
    EXPECT_TRUE(def->has_gradient() ||
                !def->not_differentiable_reason().empty())
        << "op '" << def->name()
        << "' has no gradient and does not declare why (NotDifferentiable)";
  }
}

}  // namespace
}  // namespace ipuflow
