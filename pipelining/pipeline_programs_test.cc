// A pipeline's stage parts and weight update are sub-programs of its frame
// node, compiled with the device program as a loop's body is: whatever
// walks a program's sub-programs (run counters for random streams, the
// memory plan, the report) reaches them, per replica.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ipu/ipu_strategy.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/momentum.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow::pipelining {
namespace {

constexpr int kProgramsMicroBatches = 4;
constexpr int kRuns = 2;

struct Built {
  std::unique_ptr<IPUSystem> system;
  Scope scope = Scope::NewRootScope();
  std::shared_ptr<feeds::IPUInfeedQueue> infeed;
  std::shared_ptr<feeds::IPUOutfeedQueue> outfeed;
  std::unique_ptr<Pipeline> pipeline;
};

// The four-stage test model on IPUs 0..3, `replicas` replicas.
void Build(int replicas, bool recompute, Built* b) {
  static const auto* init =
      new std::map<std::string, Tensor>(testing::InitialValues(1));
  b->system = testing::MakeSystem(4 * replicas, recompute);
  b->infeed = *feeds::IPUInfeedQueue::Create(
      testing::MicroBatches(kProgramsMicroBatches * kRuns * replicas));
  b->outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  o.computational_stages = testing::ModelStages(*init);
  o.device_mapping = {0, 1, 2, 3};
  o.gradient_accumulation_count = kProgramsMicroBatches;
  o.repeat_count = kRuns;
  o.infeed_queue = b->infeed.get();
  o.outfeed_queue = b->outfeed.get();
  o.outfeed_loss = true;
  o.optimizer_function = [](const Scope& sc, const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::MomentumOptimizer>(0.1f, 0.9f),
        ops::SoftmaxCrossEntropyLoss(sc, out[0], out[1])};
  };
  auto pipeline = Pipeline::Create(b->scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  b->pipeline = *std::move(pipeline);
}

TEST(PipelineProgramsTest, StagePartsAreSubProgramsOfTheFrameNode) {
  for (int replicas : {1, 2}) {
    Built b;
    Build(replicas, /*recompute=*/false, &b);
    if (::testing::Test::HasFatalFailure()) return;
    IPUStrategy strategy(b.system.get());
    ASSERT_TRUE(strategy.Initialize(*b.scope.graph()).ok());
    auto exe = strategy.Compile(*b.scope.graph(), {}, {b.pipeline->frame()});
    ASSERT_TRUE(exe.ok()) << exe.status();
    ASSERT_EQ((*exe)->num_replicas(), replicas);
    std::vector<std::vector<Tensor>> out;
    ASSERT_TRUE((*exe)->Execute({{}}, &out).ok());
    const Node* frame = b.pipeline->frame();
    for (int r = 0; r < replicas; ++r) {
      const Program& program = (*exe)->program(r);
      // The program spans the stages' IPUs: its plan has their shards.
      EXPECT_EQ(program.num_shards(), 4);
      // Each replica's program owns its own copies, and they ran: every
      // part once per micro-batch, the weight update once per run (the
      // counters a checkpoint's random streams are saved from).
      for (int s = 0; s < 4; ++s) {
        for (const char* pass : {" forward", " backward"}) {
          const std::string role = "stage " + std::to_string(s) + pass;
          const Program* p = program.sub_program(frame, role);
          ASSERT_NE(p, nullptr) << role;
          EXPECT_EQ(p->runs(),
                    static_cast<uint64_t>(kProgramsMicroBatches * kRuns))
              << role << " replica " << r;
          if (r > 0) EXPECT_NE(p, (*exe)->program(0).sub_program(frame, role));
        }
      }
      const Program* update = program.sub_program(frame, "weight update");
      ASSERT_NE(update, nullptr);
      EXPECT_EQ(update->runs(), static_cast<uint64_t>(kRuns));
      // Program::RunCounters (what a checkpoint saves of the random
      // streams) walks the frame's programs as it walks a loop's body.
      const auto counters =
          program.RunCounters(b.system->floating_point().seed_epoch);
      const std::string key = frame->name() + ":stage 2 backward";
      bool found = false;
      for (const auto& [k, runs] : counters) {
        if (k != key) continue;
        found = true;
        EXPECT_EQ(runs, static_cast<uint64_t>(kProgramsMicroBatches * kRuns))
            << k;
      }
      EXPECT_TRUE(found) << key;
    }
    // The memory check is the plan of what runs: stash and incoming FIFOs
    // on the IPUs that hold them, the stages' variables on theirs.
    const std::vector<IpuMemory>& m = (*exe)->ipu_memory();
    ASSERT_EQ(m.size(), 4u);
    for (int k = 0; k < 4; ++k) {
      EXPECT_GT(m[k].weights, 0) << k;
      EXPECT_EQ(m[k].accumulators, m[k].weights) << k;
      EXPECT_GT(m[k].stash, 0) << k;
      EXPECT_GT(m[k].fifos, 0) << k;  // Activations in, gradients in.
      EXPECT_GT(m[k].arena, 0) << k;
    }
  }
}

// The stash held for a part is its capacity (from the table) times what
// one micro-batch stashes; with recomputation only the stage's inputs.
TEST(PipelineProgramsTest, HeldBuffersFollowTheLayout) {
  for (bool recompute : {false, true}) {
    Built b;
    Build(1, recompute, &b);
    if (::testing::Test::HasFatalFailure()) return;
    IPUStrategy strategy(b.system.get());
    ASSERT_TRUE(strategy.Initialize(*b.scope.graph()).ok());
    auto exe = strategy.Compile(*b.scope.graph(), {}, {b.pipeline->frame()});
    ASSERT_TRUE(exe.ok()) << exe.status();
    std::vector<std::vector<Tensor>> out;
    ASSERT_TRUE((*exe)->Execute({{}}, &out).ok());
    std::optional<PipelineReport> report = b.pipeline->last_report();
    ASSERT_TRUE(report.has_value());
    const std::vector<IpuMemory>& m = (*exe)->ipu_memory();
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(m[s].stash, static_cast<int64_t>(report->stash_capacity[s]) *
                                report->stash_bytes_per_micro_batch[s])
          << s << (recompute ? " recompute" : "");
    }
  }
}

}  // namespace
}  // namespace ipuflow::pipelining
