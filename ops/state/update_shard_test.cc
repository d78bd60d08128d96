// The optional shard input of the update ops: only the shard's chunk is
// computed, bitwise as in the whole update, and counted.
#include "ops/state/update_shard.h"

#include <cstring>
#include <vector>

#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/apply_adam.h"
#include "ops/state/apply_gradient_descent.h"
#include "ops/state/initializers.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

TEST(UpdateShardTest, ChunksOfTheOriginalLayout) {
  // n = 10 over 4: c = 3: [0,3) [3,6) [6,9) [9,10).
  const int64_t begins[] = {0, 3, 6, 9}, ends[] = {3, 6, 9, 10};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((UpdateShard{i, 4}.Begin(10)), begins[i]);
    EXPECT_EQ((UpdateShard{i, 4}.End(10)), ends[i]);
  }
  // n = 5 over 4: c = 2; the last chunk is empty.
  EXPECT_EQ((UpdateShard{3, 4}.Begin(5)), 5);
  EXPECT_EQ((UpdateShard{3, 4}.End(5)), 5);
  EXPECT_EQ(UpdateShard{}.End(7), 7);
}

float W0(int i) { return 0.001f * (i % 97) - 0.04f; }

// Adam on n = 1001 elements from fixed values, whole (no shard input) or
// with shard {index, count}, on a one-IPU system; returns w, m and v after
// two steps, and the elements the updates computed (the IPU's counter).
std::vector<Tensor> Adam(int index, int count, int64_t* updated = nullptr) {
  constexpr int n = 1001;
  std::vector<float> w0(n), g(n);
  for (int i = 0; i < n; ++i) {
    w0[i] = W0(i);
    g[i] = 0.013f * ((i * 7) % 31) - 0.2f;
  }
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, w0, {n}));
  VariableHandle m =
      Variable(s.WithOpName("m"), Zeros(s, {n}, DType::kFloat32));
  VariableHandle v =
      Variable(s.WithOpName("v"), Zeros(s, {n}, DType::kFloat32));
  Output t = Placeholder(s, DType::kFloat32, {});
  Output shard;
  if (count > 0) shard = Const<int32_t>(s, {index, count}, {2});
  Node* step = ApplyAdam(s, w.handle, m.handle, v.handle, Const(s, 0.01f),
                         Const<float>(s, g, {n}), Const(s, 0.9f),
                         Const(s, 0.999f), Const(s, 1e-8f), t, 0.f, shard);
  EXPECT_TRUE(s.ok()) << s.status();
  IPUConfig config;
  config.set_auto_select_ipus(1);
  absl::StatusOr<std::unique_ptr<IPUSystem>> system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  if (!system.ok()) return {};
  IPUStrategy strategy(system->get());
  EXPECT_TRUE(strategy.Initialize(*s.graph()).ok());
  for (int i = 1; i <= 2; ++i) {
    EXPECT_TRUE(
        strategy.Run(*s.graph(), {}, {step}, {{t, Tensor::Scalar<float>(i)}})
            .ok());
  }
  if (updated != nullptr) {
    *updated = (*system)->device(0).counters().updated_elements.load();
  }
  absl::StatusOr<std::vector<Tensor>> out =
      strategy.Run(*s.graph(), {w.value, m.value, v.value});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(UpdateShardTest, AdamComputesItsChunkBitwiseAsTheWholeUpdate) {
  const std::vector<Tensor> whole = Adam(0, 0);
  ASSERT_EQ(whole.size(), 3u);
  // Chunks of 1001 over 3: 334 elements, starting at unaligned 334 and 668.
  for (int index = 0; index < 3; ++index) {
    int64_t updated = -1;
    const std::vector<Tensor> part = Adam(index, 3, &updated);
    ASSERT_EQ(part.size(), 3u);
    // Two steps of this chunk only, counted on the system's IPU.
    const UpdateShard shard{index, 3};
    EXPECT_EQ(updated, 2 * (shard.End(1001) - shard.Begin(1001)));
    for (int k = 0; k < 3; ++k) {
      const float* p = part[k].data<float>();
      for (int64_t i = 0; i < 1001; ++i) {
        const bool mine = i >= shard.Begin(1001) && i < shard.End(1001);
        const float expected =
            mine ? whole[k].data<float>()[i] : (k == 0 ? W0(i) : 0.f);
        ASSERT_EQ(std::memcmp(&p[i], &expected, 4), 0)
            << "tensor " << k << " element " << i << " shard " << index;
      }
    }
  }
}

TEST(UpdateShardTest, BadShardIsInvalidArgument) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Node* step = ApplyGradientDescent(s, w.handle, Const(s, 0.1f),
                                    Const<float>(s, {1, 1}, {2}),
                                    Const<int32_t>(s, {2, 2}, {2}));
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  absl::Status st = session.Run({}, {}, {step}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("{2, 2}"), std::string::npos) << st;
}

}  // namespace
}  // namespace ipuflow::ops
