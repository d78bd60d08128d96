// Floating-point traps: each of inv, div0 and oflo fires on a crafted graph
// with the exact message, does not fire when off or when the non-finite
// value came in through the inputs, and stops a device loop's run.
#include "core/floating_point_traps.h"

#include "core/op_registry.h"
#include "core/session.h"
#include "core/tensor_eigen.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/div.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow {
namespace {

// _Divide(x, y) = x / y (float32), an op that declares its divisor.
REGISTER_OP("_Divide")
    .Input("x")
    .Input("y")
    .SetDivisorInput(1)
    .SetShapeFn([](ShapeContext& c) {
      c.set_output(0, DType::kFloat32, c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(Tensor * z,
                       ctx.allocate_output(0, ctx.input(0).shape()));
      z->flat<float>() =
          ctx.input(0).flat<float>() / ctx.input(1).flat<float>();
      return absl::OkStatus();
    })
    .NotDifferentiable("a test op");

FloatingPointBehaviour Traps(bool inv, bool div0, bool oflo) {
  FloatingPointBehaviour fp;
  fp.inv = inv;
  fp.div0 = div0;
  fp.oflo = oflo;
  return fp;
}

absl::Status RunWith(const FloatingPointBehaviour& fp, const Scope& s,
                     const Output& fetch) {
  IPU_CHECK_OK(s.status());
  Session session(s.graph());
  session.env()->floating_point = &fp;
  std::vector<Tensor> out;
  return session.Run({}, {fetch}, &out);
}

Output Vec(const Scope& s, std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return ops::Const(s, v, TensorShape({n}));
}

TEST(FloatingPointTrapsTest, OverflowFromFiniteInputs) {
  Scope s = Scope::NewRootScope();
  Output y = ops::Mul(s.WithOpName("loss/mul"), Vec(s, {1, 2, 1e30f, -1e30f}),
                      Vec(s, {1, 2, 3, 1e30f}));
  const absl::Status st = RunWith(Traps(true, true, true), s, y);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "floating-point exception (oflo): Mul 'loss/mul' output 0 element "
            "3 is -inf from finite inputs");
  EXPECT_TRUE(RunWith(Traps(true, true, false), s, y).ok());
  EXPECT_TRUE(RunWith(FloatingPointBehaviour(), s, y).ok());
}

TEST(FloatingPointTrapsTest, InvalidOperationOnlyFromNonNaNInputs) {
  Scope s = Scope::NewRootScope();
  // 0 * inf is NaN: invalid, although an input is infinite.
  Output y = ops::Mul(s.WithOpName("m"), Vec(s, {1, 0}), Vec(s, {1, INFINITY}));
  EXPECT_EQ(RunWith(Traps(true, false, false), s, y).message(),
            "floating-point exception (inv): Mul 'm' output 0 element 1 is nan "
            "from non-NaN inputs");
  EXPECT_TRUE(RunWith(Traps(false, true, true), s, y).ok());
  // A NaN that came in is not an exception.
  Scope s2 = Scope::NewRootScope();
  Output z = ops::Add(s2, Vec(s2, {1, NAN}), Vec(s2, {1, 1}));
  EXPECT_TRUE(RunWith(Traps(true, true, true), s2, z).ok());
}

TEST(FloatingPointTrapsTest, DivisionByZeroFromADividingOp) {
  Scope s = Scope::NewRootScope();
  Output y = s.WithOpName("ratio").AddNode(
      "_Divide", {Vec(s, {1, -3, 0}), Vec(s, {2, 0, 1})});
  EXPECT_EQ(RunWith(Traps(true, true, true), s, y).message(),
            "floating-point exception (div0): _Divide 'ratio' output 0 element "
            "1 is -inf from a division by zero");
  EXPECT_TRUE(RunWith(Traps(true, false, true), s, y).ok());
  // 0 / 0 is invalid, not a division by zero.
  Scope s2 = Scope::NewRootScope();
  Output z =
      s2.WithOpName("q").AddNode("_Divide", {Vec(s2, {0}), Vec(s2, {0})});
  EXPECT_EQ(RunWith(Traps(true, true, true), s2, z).message(),
            "floating-point exception (inv): _Divide 'q' output 0 element 0 is "
            "nan from non-NaN inputs");
}

TEST(FloatingPointTrapsTest, DivIsADividingOp) {
  Scope s = Scope::NewRootScope();
  Output y = ops::Div(s.WithOpName("mean"), Vec(s, {4, 1}), Vec(s, {2, 0}));
  EXPECT_EQ(RunWith(Traps(true, true, true), s, y).message(),
            "floating-point exception (div0): Div 'mean' output 0 element 1 "
            "is inf from a division by zero");
}

TEST(FloatingPointTrapsTest, HalfOverflowWithNanooIsOverflow) {
  Scope s = Scope::NewRootScope();
  Output h = ops::Cast(s.WithOpName("to_half"), Vec(s, {1, 7e4f, -7e4f}),
                       DType::kFloat16);
  FloatingPointBehaviour fp = Traps(true, true, true);
  EXPECT_TRUE(RunWith(fp, s, h).ok());  // Saturated: finite.
  fp.nanoo = true;
  EXPECT_EQ(RunWith(fp, s, h).message(),
            "floating-point exception (oflo): Cast 'to_half' output 0 element "
            "1 is nan from a float16 overflow (nanoo)");
  fp.oflo = false;
  EXPECT_TRUE(RunWith(fp, s, h).ok());
}

TEST(FloatingPointTrapsTest, OverflowWrittenIntoAVariable) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(s.WithOpName("w"), Vec(s, {1, 3e38f}));
  Node* add =
      ops::AssignAdd(s.WithOpName("w_add"), w.handle, Vec(s, {1, 3e38f}));
  IPU_CHECK_OK(s.status());
  Session session(s.graph());
  const FloatingPointBehaviour fp = Traps(false, false, true);
  session.env()->floating_point = &fp;
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  const absl::Status st = session.Run({}, {}, {add}, &out);
  EXPECT_EQ(st.message(),
            "floating-point exception (oflo): AssignAdd 'w_add' variable 'w' "
            "element 1 is inf from finite inputs");
}

TEST(FloatingPointTrapsTest, StopsADeviceLoop) {
  Scope s = Scope::NewRootScope();
  // x doubles every iteration: 2^128 overflows at iteration 28 from 2^100.
  absl::StatusOr<loops::Loop> loop =
      loops::Repeat(s, 40,
                    [](const Scope& b, const std::vector<Output>& args) {
                      return std::vector<Output>{ops::Mul(
                          b.WithOpName("double"), args[0], ops::Const(b, 2.f))};
                    },
                    {ops::Const(s, 0x1p100f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const absl::Status st =
      RunWith(Traps(false, false, true), s, loop->outputs[0]);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("floating-point exception (oflo): Mul '"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find("double' output 0 element 0 is inf from finite "
                              "inputs"),
            std::string::npos)
      << st;
  EXPECT_TRUE(RunWith(FloatingPointBehaviour(), s, loop->outputs[0]).ok());
}

}  // namespace
}  // namespace ipuflow
