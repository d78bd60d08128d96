// Run under `mpirun -np P` (//tests/distributed:mpi_pipeline_test): a
// replicated training pipeline (the four-stage model of pipelining/
// pipeline_test_model.h on 2 IPUs per replica, gradient accumulation,
// cross-replica momentum) on P processes x 1 replica ends with bitwise the
// weights and per-micro-batch losses of one process with P replicas; with
// the optimizer state offloaded and sharded over the global replicas too.
// Global replica g reads dataset elements g, g + P, ... in both runs.
#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_link.h"
#include "core/ipu/ipu_strategy.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/cross_replica.h"
#include "optimizers/momentum.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow {
namespace {

using namespace pipelining::testing;  // NOLINT: the test model's names.

constexpr int kMicroBatches = 4;
constexpr int kRuns = 3;

std::shared_ptr<ProcessLink> Link() {
  static std::shared_ptr<distributed::MpiLink> link =
      *distributed::MpiLink::World();
  return link;
}

struct Trained {
  std::map<std::string, std::vector<Tensor>> weights;  // [name][replica]
  Tensor losses;  // [steps, replicas] (or [steps] for one replica).
};

// Trains on `replicas` local replicas; with `link`, as this process's
// share of the global ones, reading its shard of the micro-batches.
Trained Train(int replicas, std::shared_ptr<ProcessLink> link, bool sharded) {
  const int P = link != nullptr ? link->process_count() : 1;
  const int me = link != nullptr ? link->process_index() : 0;
  const int global = replicas * P;
  auto init = InitialValues(1);
  IPUConfig config;
  config.set_auto_select_ipus(2 * replicas);
  config.set_replication_factor(replicas);
  config.set_minimum_remote_tensor_size(4);  // Offload this small state.
  config.set_seed(5);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  if (link != nullptr) {
    EXPECT_TRUE((*system)->SetProcessLink(link).ok());
  }
  feeds::DatasetPtr data = MicroBatches(global * kMicroBatches * kRuns);
  if (link != nullptr) data = data->Shard(P, me);
  auto infeed = *feeds::IPUInfeedQueue::Create(data);
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  Scope scope = Scope::NewRootScope();
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.device_mapping = {0, 0, 1, 1};
  o.gradient_accumulation_count = kMicroBatches;
  o.repeat_count = kRuns;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.outfeed_loss = true;
  o.reduction_method = optimizers::GradientAccumulationReductionMethod::kMean;
  o.offload_weight_update_variables = sharded;
  o.replicated_optimizer_state_sharding = sharded;
  o.optimizer_function = [](const Scope& s, const std::vector<Output>& out) {
    return pipelining::OptimizerFunctionOutput{
        std::make_shared<optimizers::CrossReplicaOptimizer>(
            std::make_shared<optimizers::MomentumOptimizer>(0.1f, 0.9f)),
        ops::SoftmaxCrossEntropyLoss(s, out[0], out[1])};
  };
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  if (!pipeline.ok()) return {};
  IPUStrategy strategy(system->get());
  EXPECT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto exe = strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  std::vector<std::vector<Tensor>> results;
  absl::Status run = (*exe)->Execute({{}}, &results);
  EXPECT_TRUE(run.ok()) << run;
  Trained t;
  auto w = (*exe)->ReadVariables(".*/[wb][0-9]");
  EXPECT_TRUE(w.ok()) << w.status();
  if (w.ok()) t.weights = *w;
  auto losses = outfeed->Dequeue();
  EXPECT_TRUE(losses.ok()) << losses.status();
  if (losses.ok()) t.losses = (*losses)["loss"];
  return t;
}

void ExpectAcrossEqualsOneProcess(bool sharded) {
  auto link = Link();
  const int P = link->process_count(), me = link->process_index();
  const Trained one = Train(P, nullptr, sharded);
  const Trained across = Train(1, link, sharded);
  ASSERT_GE(across.weights.size(), 7u);  // w0-w3, b0-b2 (and slots).
  ASSERT_EQ(across.weights.size(), one.weights.size());
  for (const auto& [name, per_replica] : across.weights) {
    ASSERT_EQ(per_replica.size(), 1u) << name;
    const Tensor& want = one.weights.at(name).at(me);
    ASSERT_EQ(per_replica[0].TotalBytes(), want.TotalBytes()) << name;
    EXPECT_EQ(std::memcmp(per_replica[0].raw_data(), want.raw_data(),
                          want.TotalBytes()),
              0)
        << name << " on process " << me << " of " << P << " (sharded "
        << sharded << ") differs from replica " << me << " of one process";
  }
  // Losses: one per micro-batch; this process's column of the one-process
  // [steps, P] outfeed.
  const int steps = kMicroBatches * kRuns;
  ASSERT_EQ(across.losses.NumElements(), steps);
  ASSERT_EQ(one.losses.NumElements(), steps * P);
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ(across.losses.data<float>()[s],
              one.losses.data<float>()[s * P + me])
        << "loss of micro-batch " << s << " on process " << me;
  }
}

TEST(MpiPipelineTest, ReplicatedPipelineAsOneProcess) {
  ExpectAcrossEqualsOneProcess(/*sharded=*/false);
}

TEST(MpiPipelineTest, ShardedOffloadedStateAsOneProcess) {
  ExpectAcrossEqualsOneProcess(/*sharded=*/true);
}

}  // namespace
}  // namespace ipuflow
