// The README's main example: Graphcore's tutorial "PopTorch Parallel
// Execution Using Pipelining" in C++, on Fashion-MNIST and emulated IPUs, in
// the order: the network's layers, the blocks B1-B4 (one per IPU), the
// options, the data loader, the training calls with a monitor thread, then
// inference. Flags and reports: tutorial_flags.h; checkpoints:
// tutorial_checkpoints.h; mpirun's processes: tutorial_processes.h.
//
//   ./bazelw run //examples:train_fashion_mnist [-- --replication-factor 2]
//   mpirun -np 2 bazel-bin/examples/train_fashion_mnist --replication-factor 1
//   ... --checkpoint-dir /tmp/ckpt --checkpoint-every 10 [--resume]
#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "core/status.h"
#include "examples/models.h"
#include "examples/tutorial_checkpoints.h"
#include "examples/tutorial_flags.h"
#include "examples/tutorial_processes.h"
#include "examples/tutorial_reports.h"
#include "examples/tutorial_support.h"
#include "feeds/data_loader.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/array/reshape.h"
#include "ops/math/cast.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adamw.h"
#include "optimizers/cross_replica.h"
#include "optimizers/loss_scaling.h"
#include "pipelining/execution_strategy.h"
#include "pipelining/pipeline.h"

namespace ipuflow {
namespace {

using examples::kStages;

// The network's layers (the tutorial's Network): Block(1, 10, 5, 2),
// Block(10, 20, 5, 2) (each a 5x5 convolution, 2x2 max pooling and ReLU),
// Linear(320, 256) with ReLU and Linear(256, 10). Layer b's weights live on
// IPU b (models::CreateConvNetParams). In float16 the images are cast on
// the device, so every activation is float16.
Output Layer(const Scope& scope, const models::ConvNetParams& p, int b,
             Output x) {
  const char* const kNames[kStages] = {"conv1", "conv2", "fc1", "fc2"};
  const Scope s = scope.NewSubScope(kNames[b]);
  if (b == 0 && x.dtype() != p.dtype) x = ops::Cast(s, x, p.dtype);
  if (b < 2) return models::ConvPoolRelu(s, p.blocks[b], x);
  if (b == 2) x = ops::Reshape(s, x, {-1, 320});
  return models::Dense(s, p.blocks[b], x, /*relu=*/b == 2);
}

// "Annotation for model partitioning": layer b is block B<b+1> on IPU b
// (poptorch.Block("B1", ipu_id=0)), mapping (x, labels) -> (y, labels); B4
// adds the loss (in float32 whatever the precision, as autocast does) and
// hands the pipeline loss and accuracy when training, accuracy when testing.
absl::StatusOr<pipelining::BlockModel> Network(
    const models::ConvNetParams& params, bool training) {
  pipelining::BlockModel model;
  for (int b = 0; b < kStages; ++b) {
    RETURN_IF_ERROR(model.Add(
        absl::StrCat("B", b + 1),
        [&params, b, training](const Scope& s, const std::vector<Output>& a) {
          Output y = Layer(s, params, b, a[0]);
          if (b + 1 < kStages) return std::vector<Output>{y, a[1]};
          if (y.dtype() != DType::kFloat32) {
            y = ops::Cast(s, y, DType::kFloat32);
          }
          Output accuracy = models::Accuracy(s, y, a[1]);
          if (!training) return std::vector<Output>{accuracy};
          return std::vector<Output>{ops::SoftmaxCrossEntropyLoss(s, y, a[1]),
                                     accuracy};
        },
        /*ipu_id=*/b));
  }
  return model;
}

// `procs`: under mpirun, this process's share (its replicas, its data).
absl::Status RunTutorial(const examples::TutorialFlags& f,
                         examples::TutorialProcesses& procs) {
  if (f.profile) RETURN_IF_ERROR(examples::PrepareProfileDir(f.profile_dir));
  // The network's weights: block b's on IPU b of every replica; the
  // training and the inference pipeline share them.
  Scope root = Scope::NewRootScope();
  std::vector<Scope> block_scopes;
  for (int b = 0; b < kStages; ++b) block_scopes.push_back(root.WithIpu(b));
  const models::ConvNetParams params = models::CreateConvNetParams(
      root.NewSubScope("convnet"), block_scopes, f.seed,
      f.fp16 ? DType::kFloat16 : DType::kFloat32);

  // The options. The IPUs: R replicas x 4 stages (each weight update
  // averages the gradients over the micro-batches and the replicas: PopTorch
  // user guide, "Efficient data batching"); in float16, stochastic rounding
  // (IPUConfig.floating_point_behaviour.esr), seeded so runs repeat.
  IPUConfig config;
  config.set_auto_select_ipus(f.replicas * kStages);
  config.set_replication_factor(f.replicas);
  config.set_intra_op_threads_per_ipu(f.intra_op_threads);
  if (f.fp16) {
    config.mutable_floating_point_behaviour()->set_esr(f.esr);
    config.set_seed(static_cast<uint64_t>(f.seed));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system,
                   IPUSystem::Create(config));
  RETURN_IF_ERROR(procs.Link(*system));
  // "Execution strategies": one stage per block on its IPU (AutoStage
  // SameAsIpu), pipelined (PipelinedExecution) or sharded (ShardedExecution).
  const auto stage = pipelining::AutoStage::kSameAsIpu;
  const auto execution = f.pipelined() ? pipelining::PipelinedExecution(stage)
                                       : pipelining::ShardedExecution(stage);
  // Training, "Setting gradient accumulation and device iterations": the
  // mean of the accumulated gradients, as PopTorch; float16 gradients
  // accumulate in float32 (PopTorch's accum_type).
  ASSIGN_OR_RETURN(pipelining::BlockModel train_model, Network(params, true));
  pipelining::PipelineOptions t;
  RETURN_IF_ERROR(pipelining::ApplyStrategy(train_model, execution, &t));
  // --schedule: Grouped (PipelinedExecution's) or another (PIPELINING.md).
  if (f.pipelined()) t.pipeline_schedule = f.schedule;
  t.name = "train";
  t.gradient_accumulation_count = f.gradient_accumulation;
  t.repeat_count = f.device_iterations;
  t.reduction_method = pipelining::ReductionMethod::kMean;
  if (f.fp16) t.gradient_accumulation_dtype = DType::kFloat32;
  // "Saving memory by offloading to remote buffers".
  t.offload_weight_update_variables = f.offload_optimiser;
  t.replicated_optimizer_state_sharding = f.replicated_optimizer_state_sharding;
  // AdamW on the accumulated gradients, averaged over the replicas first;
  // in float16 with float32 master weights and state, inside loss scaling
  // whose scale the replicas share.
  t.optimizer_function = [&f](const Scope&, const std::vector<Output>& out) {
    auto adamw = std::make_shared<optimizers::AdamWOptimizer>(f.learning_rate);
    std::shared_ptr<optimizers::Optimizer> optimizer =
        std::make_shared<optimizers::CrossReplicaOptimizer>(adamw);
    if (f.fp16) {
      adamw->set_master_weights(true);
      optimizer = std::make_shared<optimizers::LossScalingOptimizer>(
          optimizer, f.loss_scaling);
    }
    return pipelining::OptimizerFunctionOutput{optimizer, out[0]};
  };
  // Inference: the same blocks without the loss; the device iterations are
  // the pipeline's micro-batches per call.
  ASSIGN_OR_RETURN(pipelining::BlockModel test_model, Network(params, false));
  pipelining::PipelineOptions e;
  RETURN_IF_ERROR(pipelining::ApplyStrategy(test_model, execution, &e));
  e.name = "inference";
  e.gradient_accumulation_count = f.test_iterations;

  // The data loader (poptorch.DataLoader): one training call takes
  // device_iterations weight updates of accumulation x replicas
  // micro-batches, the combined batch; drop_last leaves a partial call for
  // the next epoch. --resume: from the newest checkpoint, its data where the
  // devices had stopped (docs/CHECKPOINTS.md).
  ASSIGN_OR_RETURN(examples::TutorialData data,
                   examples::LoadTutorialData(f.train_limit, f.test_limit));
  ASSIGN_OR_RETURN(auto ckpt,
                   examples::TutorialCheckpoints::Open(f, procs.index()));
  ASSIGN_OR_RETURN(
      auto train_loader,
      ckpt.TrainLoader(
          feeds::FromTensorSlices({data.train.images, data.train.labels}),
          examples::LoaderOptions(f, true, procs.index())));
  ASSIGN_OR_RETURN(
      auto test_loader,
      feeds::DataLoader::Create(
          feeds::FromTensorSlices({data.test.images, data.test.labels}),
          examples::LoaderOptions(f, false, procs.index())));
  ASSIGN_OR_RETURN(feeds::DatasetPtr train_micro,
                   train_loader->ToInfeedDataset());
  ASSIGN_OR_RETURN(feeds::DatasetPtr test_micro,
                   test_loader->ToInfeedDataset());
  ASSIGN_OR_RETURN(
      auto train_feed,
      feeds::IPUInfeedQueue::Create(
          train_micro->Repeat(f.epochs - train_loader->start_epoch()),
          feeds::InfeedOptions{examples::TutorialCheckpoints::kInfeedName}));
  ASSIGN_OR_RETURN(auto test_feed, feeds::IPUInfeedQueue::Create(test_micro));
  ASSIGN_OR_RETURN(auto train_out, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(auto test_out, feeds::IPUOutfeedQueue::Create());
  examples::PrintDataLoader(f, *train_loader);
  RETURN_IF_ERROR(procs.Agree({train_loader.get(), test_loader.get()}));
  t.infeed_queue = train_feed.get();
  t.outfeed_queue = train_out.get();
  e.infeed_queue = test_feed.get();
  e.outfeed_queue = test_out.get();

  // The training and inference models (poptorch.trainingModel and
  // inferenceModel): each pipeline's frame node compiles as a loop's
  // would; a call is one Execute on every replica (results leave by the
  // outfeeds). --resume restores the checkpoint into the training program.
  ASSIGN_OR_RETURN(auto training,
                   pipelining::Pipeline::Create(root, std::move(t)));
  ASSIGN_OR_RETURN(auto inference,
                   pipelining::Pipeline::Create(root, std::move(e)));
  IPUStrategy strategy(system.get());
  RETURN_IF_ERROR(strategy.Initialize(*root.graph()));
  ASSIGN_OR_RETURN(DeviceProgram * trained,
                   strategy.Compile(*root.graph(), {}, {training->frame()}));
  ASSIGN_OR_RETURN(DeviceProgram * tested,
                   strategy.Compile(*root.graph(), {}, {inference->frame()}));
  RETURN_IF_ERROR(ckpt.Attach(root.graph(), trained));

  // "Training the model". The monitor thread takes each step's loss and
  // accuracy ([replicas] per step) from the outfeed as the device produces
  // them and draws the progress bar.
  examples::PrintTrainingSummary(f);
  ASSIGN_OR_RETURN(const auto calls,
                   ckpt.Calls(f.epochs * train_loader->len()));
  const int64_t per_call = f.device_iterations * f.gradient_accumulation;
  examples::OutfeedMonitor monitor(
      train_out.get(), calls.done() * per_call, f.replicas, "0", "1",
      /*window=*/50,
      procs.ProgressBar(calls.first * per_call, calls.total * per_call,
                        f.replicas));
  std::vector<std::vector<Tensor>> none;
  absl::Status status;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = calls.first; c < calls.last && status.ok(); ++c) {
    status = trained->Execute({{}}, &none);
    if (status.ok()) status = ckpt.AfterCall(c + 1, c + 1 == calls.last);
  }
  const double train_seconds = examples::SecondsSince(start);
  monitor.Stop();  // Closes the outfeed: ends early if a call failed.
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(examples::ReportTraining(f, calls.done(), train_seconds,
                                           monitor, *training, *trained));
  if (calls.last < calls.total) return ckpt.Stopped();  // --stop-after.

  // Inference: every replica tests its share; the outfeed holds one
  // accuracy per micro-batch per replica ([steps, replicas]).
  const auto test_start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < test_loader->len(); ++c) {
    RETURN_IF_ERROR(tested->Execute({{}}, &none));
  }
  const double test_seconds = examples::SecondsSince(test_start);
  ASSIGN_OR_RETURN(feeds::OutfeedResult results, test_out->Dequeue());
  double correct = 0;
  for (float a : results["0"].span<float>()) correct += a * f.test_batch_size;
  ASSIGN_OR_RETURN(
      const auto all,  // Every process's share: (correct, images).
      procs.Sum(correct, results["0"].NumElements() * f.test_batch_size));
  examples::PrintTestAccuracy(all.first, all.second, test_seconds);
  return examples::WriteReports(f, *training, *inference, *trained, *system);
}

}  // namespace
}  // namespace ipuflow

int main(int argc, char** argv) {
  return ipuflow::examples::TutorialMain(argc, argv, ipuflow::RunTutorial);
}
