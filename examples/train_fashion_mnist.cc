// The README's main example: Graphcore's tutorial "PopTorch Parallel
// Execution Using Pipelining" in C++, on Fashion-MNIST and emulated IPUs,
// in the tutorial's order: hyperparameters, data, the model in blocks
// B1-B4, the execution strategy, training with a monitor, inference.
//
//   ./bazelw run //examples:train_fashion_mnist
//   ./bazelw run //examples:train_fashion_mnist -- --replication-factor 2
//   ./bazelw run //examples:train_fashion_mnist -- --strategy sharded
//   ./bazelw run //examples:train_fashion_mnist -- --profile --profile-dir prof
//
// Replication (data parallelism around the pipeline): R replicas of the
// 4-stage pipeline run on R x 4 IPUs, replica r taking micro-batches r,
// r + R, ... Each weight update averages the gradients of
// gradient-accumulation micro-batches on every replica, then over the
// replicas, so the combined batch is batch-size x gradient-accumulation x R.
// The default accumulation, 10 / R, keeps the tutorial's 400 (PopTorch user
// guide, "Efficient data batching": replicationFactor multiplies the batch
// each weight update sees; the reduction is a mean over both).
//
// --profile writes, for the last training and inference calls (replica 0):
// train_trace.json (ui.perfetto.dev), train_timeline.svg, test_trace.json,
// test_timeline.svg and summary.txt.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/command_line.h"
#include "core/ipu/ipu_strategy.h"
#include "core/status.h"
#include "examples/models.h"
#include "examples/tutorial_support.h"
#include "feeds/data_loader.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/math/cast.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adamw.h"
#include "optimizers/cross_replica.h"
#include "optimizers/loss_scaling.h"
#include "pipelining/execution_strategy.h"
#include "pipelining/pipeline.h"
#include "pipelining/trace.h"

// Setting hyperparameters: the tutorial's defaults.
ABSL_FLAG(int, batch_size, 40, "micro-batch size for training");
ABSL_FLAG(int, device_iterations, 10,
          "weight updates per host call (pipeline runs per call)");
ABSL_FLAG(int, gradient_accumulation, -1,
          "micro-batches per weight update on each replica (the pipeline's "
          "gradient_accumulation_count); default 10 / --replication-factor, "
          "which keeps the combined batch per weight update, batch-size x "
          "gradient-accumulation x replication-factor, at 400");
ABSL_FLAG(int, replication_factor, 1,
          "replicas of the 4-stage pipeline, on replication-factor x 4 IPUs; "
          "each weight update averages the accumulated gradients over the "
          "replicas (e.g. 2 replicas: gradient accumulation 10 -> 5, the same "
          "combined batch of 400)");
ABSL_FLAG(int, test_batch_size, 8, "micro-batch size for inference");
ABSL_FLAG(int, test_device_iterations, 100,
          "inference micro-batches per replica per host call");
ABSL_FLAG(int, epochs, 1, "passes over the training set");
ABSL_FLAG(double, learning_rate, 0.001, "AdamW learning rate");
ABSL_FLAG(std::string, strategy, "pipelined",
          "pipelined (all IPUs busy: Grouped schedule) or sharded (one IPU "
          "at a time: Sequential schedule)");
ABSL_FLAG(bool, offload_optimiser, false,
          "keep AdamW's state in remote memory between weight updates");
ABSL_FLAG(bool, replicated_optimizer_state_sharding, false,
          "with --offload-optimiser and replicas: each replica keeps 1/R of "
          "the offloaded state (TensorFlow IPU guide 6.9); --debug shows the "
          "saving per replica");
ABSL_FLAG(bool, profile, false,
          "write the execution traces and timelines to --profile-dir");
ABSL_FLAG(std::string, profile_dir, "profile", "where --profile writes");
ABSL_FLAG(bool, debug, false,
          "print the per-IPU memory report and the pipeline summaries");
ABSL_FLAG(int64_t, train_limit, -1, "use only the first N training images");
ABSL_FLAG(int64_t, test_limit, -1, "use only the first N test images");
ABSL_FLAG(int64_t, seed, 0, "initial weights and shuffle order");
ABSL_FLAG(std::string, loader_mode, "async",
          "how the DataLoader prepares combined batches: sync (on the infeed's "
          "thread), async (background workers, PopTorch's "
          "DataLoaderMode.Async) or rebatched (AsyncRebatched)");
ABSL_FLAG(int, loader_workers, 1, "the DataLoader's worker threads");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, or fp16: the ConvNet in float16 (weights and activations) "
          "with float32 master weights and AdamW state, stochastic rounding "
          "(IPUConfig.floating_point_behaviour.esr) and PopTorch's automatic "
          "loss scaling (Performance guide 4.6, \"Mixed precision\")");
ABSL_FLAG(std::string, stochastic_rounding, "replica_identical_only",
          "with --precision fp16, IPUConfig.floating_point_behaviour.esr: "
          "replica_identical_only (the default: stochastic for the values "
          "every replica holds alike, i.e. the weights cast from their "
          "float32 masters, as the Performance guide recommends 'in "
          "particular during weight update'; activations round to nearest), "
          "on (every float16 result; about 1 ns per element on this CPU) or "
          "off");
ABSL_FLAG(std::string, loss_scaling, "automatic",
          "with --precision fp16: automatic (PopTorch's histogram rule), "
          "gradscaler (PyTorch's GradScaler) or a number (a static scale)");

namespace ipuflow {
namespace {

constexpr int kStages = 4;  // B1-B4, one per IPU.
constexpr int kOneReplicaAccumulation = 10;
constexpr int kMaxIpus = 64;  // An IPU-POD64.
// Automatic loss scaling's first scale; it halves or doubles after every
// weight update (PopART's rule) from there.
constexpr float kInitialLossScale = 128.f;

// The gradient accumulation per replica: the flag's, or the one that keeps
// one replica's combined batch. InvalidArgument naming replicas, stages and
// IPUs when the replication factor cannot be laid out or filled.
absl::StatusOr<int> GradientAccumulation(int replicas, int requested,
                                         bool pipelined) {
  if (replicas < 1 || replicas * kStages > kMaxIpus) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replication-factor ", replicas, ": each replica is the ", kStages,
        "-stage pipeline on its own ", kStages, " IPUs, and replicas x ",
        kStages, " stages must be between ", kStages, " and ", kMaxIpus,
        " IPUs: use 1 to ", kMaxIpus / kStages, " replicas"));
  }
  const std::string layout =
      absl::StrCat(replicas, " replicas x ", kStages,
                   " stages = ", replicas * kStages, " IPUs");
  int accumulation = requested;
  if (accumulation < 0) {
    if (kOneReplicaAccumulation % replicas != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--replication-factor ", replicas, " (", layout,
          "): the default gradient accumulation keeps the combined batch of "
          "one replica by accumulating ",
          kOneReplicaAccumulation, " / replicas micro-batches on each, and ",
          kOneReplicaAccumulation, " is not a multiple of ", replicas,
          "; use 1 or 2 replicas, or pass --gradient-accumulation"));
    }
    accumulation = kOneReplicaAccumulation / replicas;
  }
  // PopTorch's rule: a pipeline fills only with one micro-batch per stage.
  if (pipelined && accumulation < kStages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient accumulation ", accumulation, " with --replication-factor ",
        replicas, " (", layout, "): each replica's pipeline needs at least ",
        kStages,
        " micro-batches per weight update, one per stage; use fewer "
        "replicas or pass --gradient-accumulation ",
        kStages, " or more"));
  }
  if (accumulation < 1) {
    return absl::InvalidArgumentError(
        "--gradient-accumulation must be positive");
  }
  return accumulation;
}

// Model definition, "Annotation for model partitioning": the Network's
// layers as blocks B1-B4, block b on IPU b - 1 (poptorch.Block("B1",
// ipu_id=0)). "Defining the training model": the loss joins the last block.
// A block maps (x, labels) -> (y, labels); B4 hands the pipeline its
// results: loss and accuracy when training, accuracy when testing.
absl::StatusOr<pipelining::BlockModel> Network(
    const models::ConvNetParams& params, bool training) {
  pipelining::BlockModel model;
  for (int b = 0; b < kStages; ++b) {
    RETURN_IF_ERROR(model.Add(
        absl::StrCat("B", b + 1),
        [&params, b, training](const Scope& s, const std::vector<Output>& a) {
          Output y = models::ConvNetBlock(s, params, b, a[0]);
          if (b + 1 < kStages) return std::vector<Output>{y, a[1]};
          // The loss in float32 whatever the model's precision (as
          // autocast does): the scaled gradient enters float16 as
          // S x d(loss)/d(logits), not as S itself, which would saturate.
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

// Execution strategies: one stage per block on the block's IPU
// (AutoStage SameAsIpu), pipelined (PipelinedExecution) or sharded
// (ShardedExecution, for debugging).
absl::StatusOr<pipelining::PipelineOptions> Staged(
    const pipelining::BlockModel& model, const std::string& strategy) {
  const auto auto_stage = pipelining::AutoStage::kSameAsIpu;
  pipelining::PipelineOptions o;
  RETURN_IF_ERROR(pipelining::ApplyStrategy(
      model,
      strategy == "sharded" ? pipelining::ShardedExecution(auto_stage)
                            : pipelining::PipelinedExecution(auto_stage),
      &o));
  return o;
}

// Data parallelism keeps replicas in step: every replica applies the same
// averaged update, so weights and optimizer state must be bitwise equal.
absl::Status CheckReplicasAgree(const Executable& exe) {
  ASSIGN_OR_RETURN(auto variables, exe.ReadVariables(".*"));
  for (const auto& [name, per_replica] : variables) {
    for (size_t r = 1; r < per_replica.size(); ++r) {
      if (std::memcmp(per_replica[r].raw_data(), per_replica[0].raw_data(),
                      per_replica[0].TotalBytes()) != 0) {
        return absl::InternalError(absl::StrCat("replica ", r, "'s '", name,
                                                "' differs from replica 0's"));
      }
    }
  }
  std::printf(
      "Replicas in step: %zu variables bitwise equal on all %d "
      "replicas\n",
      variables.size(), exe.num_replicas());
  return absl::OkStatus();
}

void WriteProfile(const std::string& dir,
                  const pipelining::PipelineReport& train,
                  const pipelining::PipelineReport& test,
                  const std::string& memory) {
  using namespace pipelining;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  auto write = [&](const std::string& file, const std::string& text) {
    std::ofstream out(dir + "/" + file);
    out << text;
    return static_cast<bool>(out);
  };
  SvgOptions train_svg, test_svg;
  train_svg.title = absl::StrCat("Training: ", train.repeats,
                                 " pipeline runs (virtual clocks)");
  test_svg.title = "Inference (virtual clocks)";
  const bool ok =
      write("train_trace.json", ToChromeTraceJson(train.items)) &&
      write("train_trace_wall.json",
            ToChromeTraceJson(train.wall_items, "wall clock")) &&
      write("train_timeline.svg", ToSvgTimeline(train.items, train_svg)) &&
      write("test_trace.json", ToChromeTraceJson(test.items)) &&
      write("test_timeline.svg", ToSvgTimeline(test.items, test_svg)) &&
      write("summary.txt",
            absl::StrCat("Training (last call)\n", train.Summary(),
                         "\nInference (last call)\n", test.Summary(),
                         "\nMemory\n", memory));
  std::printf(
      "%s profile to %s/ (train_trace.json, train_timeline.svg, "
      "test_trace.json, test_timeline.svg, summary.txt)\n",
      ok ? "Wrote the" : "Could not write the", dir.c_str());
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

absl::Status RunTutorial() {
  // Setting hyperparameters.
  const int batch_size = absl::GetFlag(FLAGS_batch_size);
  const int device_iterations = absl::GetFlag(FLAGS_device_iterations);
  const int test_batch_size = absl::GetFlag(FLAGS_test_batch_size);
  const int test_iterations = absl::GetFlag(FLAGS_test_device_iterations);
  const int epochs = absl::GetFlag(FLAGS_epochs);
  const float learning_rate =
      static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  const std::string strategy_name = absl::GetFlag(FLAGS_strategy);
  if (strategy_name != "pipelined" && strategy_name != "sharded") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy must be pipelined or sharded, got '", strategy_name, "'"));
  }
  if (batch_size < 1 || device_iterations < 1 || test_batch_size < 1 ||
      test_iterations < 1 || epochs < 1) {
    return absl::InvalidArgumentError(
        "--batch-size, --device-iterations, --test-batch-size, "
        "--test-device-iterations and --epochs must be positive");
  }
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "fp32" && precision != "fp16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision must be fp32 or fp16, got '", precision, "'"));
  }
  const bool fp16 = precision == "fp16";
  FloatingPointBehaviourConfig::StochasticRoundingBehaviour esr;
  if (const std::string sr = absl::GetFlag(FLAGS_stochastic_rounding);
      sr == "on") {
    esr = FloatingPointBehaviourConfig::ON;
  } else if (sr == "off") {
    esr = FloatingPointBehaviourConfig::OFF;
  } else if (sr == "replica_identical_only") {
    esr = FloatingPointBehaviourConfig::REPLICA_IDENTICAL_ONLY;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stochastic-rounding must be replica_identical_only, on or off, "
        "got '",
        sr, "'"));
  }
  optimizers::LossScaling loss_scaling =
      optimizers::LossScaling::Automatic(kInitialLossScale);
  if (const std::string ls = absl::GetFlag(FLAGS_loss_scaling);
      ls == "gradscaler") {
    loss_scaling = optimizers::LossScaling::GradScaler();
  } else if (ls != "automatic") {
    float scale = 0;
    if (!absl::SimpleAtof(ls, &scale) || !(scale > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--loss-scaling must be automatic, gradscaler or a positive number, "
          "got '",
          ls, "'"));
    }
    loss_scaling = optimizers::LossScaling::Static(scale);
  }
  const int replicas = absl::GetFlag(FLAGS_replication_factor);
  ASSIGN_OR_RETURN(
      const int accumulation,
      GradientAccumulation(replicas, absl::GetFlag(FLAGS_gradient_accumulation),
                           strategy_name == "pipelined"));

  // Preparing the data (PopTorch's DataLoader): one host call trains
  // device_iterations weight updates of accumulation x replicas
  // micro-batches, the combined batch; one inference call tests
  // test_iterations micro-batches per replica. drop_last: a partial call
  // is left for the next epoch, so every image used is counted once.
  ASSIGN_OR_RETURN(examples::TutorialData data,
                   examples::LoadTutorialData(absl::GetFlag(FLAGS_train_limit),
                                              absl::GetFlag(FLAGS_test_limit)));
  const int64_t steps_per_call =
      static_cast<int64_t>(device_iterations) * accumulation;
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  feeds::DataLoaderOptions lo;
  const std::string mode = absl::GetFlag(FLAGS_loader_mode);
  if (mode == "sync") {
    lo.mode = feeds::DataLoaderMode::kSync;
  } else if (mode == "async") {
    lo.mode = feeds::DataLoaderMode::kAsync;
  } else if (mode == "rebatched") {
    lo.mode = feeds::DataLoaderMode::kAsyncRebatched;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loader-mode must be sync, async or rebatched, got '", mode, "'"));
  }
  lo.num_workers = absl::GetFlag(FLAGS_loader_workers);
  lo.replicas = replicas;
  feeds::DataLoaderOptions train_lo = lo;
  train_lo.batch_size = batch_size;
  train_lo.device_iterations = device_iterations;
  train_lo.gradient_accumulation = accumulation;
  train_lo.shuffle = true;
  train_lo.seed = 42 + static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(
      auto train_loader,
      feeds::DataLoader::Create(
          feeds::FromTensorSlices({data.train.images, data.train.labels}),
          train_lo));
  feeds::DataLoaderOptions test_lo = lo;
  test_lo.batch_size = test_batch_size;
  test_lo.device_iterations = test_iterations;
  ASSIGN_OR_RETURN(
      auto test_loader,
      feeds::DataLoader::Create(
          feeds::FromTensorSlices({data.test.images, data.test.labels}),
          test_lo));
  const int64_t train_calls = epochs * train_loader->len();
  const int64_t test_calls = test_loader->len();
  ASSIGN_OR_RETURN(feeds::DatasetPtr train_micro,
                   train_loader->ToInfeedDataset());
  ASSIGN_OR_RETURN(feeds::DatasetPtr test_micro,
                   test_loader->ToInfeedDataset());
  ASSIGN_OR_RETURN(auto train_feed,
                   feeds::IPUInfeedQueue::Create(train_micro->Repeat(epochs)));
  ASSIGN_OR_RETURN(auto test_feed, feeds::IPUInfeedQueue::Create(test_micro));
  std::printf(
      "DataLoader (%s, %d worker(s)): combined batch %d x %d device "
      "iterations x %d replica(s) x %d gradient accumulation = %lld "
      "images per host call, %lld calls per epoch (%lld images left "
      "for the next epoch)\n",
      feeds::DataLoaderModeName(lo.mode).c_str(),
      static_cast<int>(lo.num_workers), batch_size, device_iterations, replicas,
      accumulation, static_cast<long long>(train_loader->combined_batch_size()),
      static_cast<long long>(train_loader->len()),
      static_cast<long long>(train_loader->unused_samples_per_epoch()));
  ASSIGN_OR_RETURN(auto train_out, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(auto test_out, feeds::IPUOutfeedQueue::Create());

  // The IPUs: replicas x stages.
  IPUConfig config;
  config.set_auto_select_ipus(replicas * kStages);
  config.set_replication_factor(replicas);
  if (fp16) {
    // Stochastic rounding of every float32 -> float16 result (the
    // Performance guide recommends it "in particular during weight
    // update"), seeded so runs repeat.
    config.mutable_floating_point_behaviour()->set_esr(esr);
    config.set_seed(static_cast<uint64_t>(seed));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system,
                   IPUSystem::Create(config));
  IPUStrategy strategy(system.get());

  // Model definition: block b's variables on IPU b (of every replica); the
  // training and the inference pipeline share them.
  Scope root = Scope::NewRootScope();
  std::vector<Scope> block_scopes;
  for (int b = 0; b < kStages; ++b) block_scopes.push_back(root.WithIpu(b));
  const models::ConvNetParams params = models::CreateConvNetParams(
      root.NewSubScope("convnet"), block_scopes, seed,
      fp16 ? DType::kFloat16 : DType::kFloat32);

  // Execution strategies, then "Setting gradient accumulation and device
  // iterations": the mean of the accumulated gradients, as PopTorch.
  ASSIGN_OR_RETURN(pipelining::BlockModel train_model, Network(params, true));
  ASSIGN_OR_RETURN(pipelining::PipelineOptions t,
                   Staged(train_model, strategy_name));
  t.name = "train";
  t.gradient_accumulation_count = accumulation;
  t.repeat_count = device_iterations;
  t.reduction_method = pipelining::ReductionMethod::kMean;
  // float16 gradients accumulate in float32 (PopTorch's accum_type default),
  // which the float32 masters then take without a rounding.
  if (fp16) t.gradient_accumulation_dtype = DType::kFloat32;
  t.infeed_queue = train_feed.get();
  t.outfeed_queue = train_out.get();
  // "Saving memory by offloading to remote buffers".
  t.offload_weight_update_variables = absl::GetFlag(FLAGS_offload_optimiser);
  t.replicated_optimizer_state_sharding =
      absl::GetFlag(FLAGS_replicated_optimizer_state_sharding);
  // AdamW on the accumulated gradients, averaged over the replicas first
  // (once per weight update; the identity with one replica). In float16:
  // float32 master weights and state, and automatic loss scaling (PopTorch's
  // histogram rule) around it, its scale shared by the replicas.
  t.optimizer_function = [learning_rate, fp16, loss_scaling](
                             const Scope&, const std::vector<Output>& out) {
    auto adamw = std::make_shared<optimizers::AdamWOptimizer>(learning_rate);
    std::shared_ptr<optimizers::Optimizer> optimizer =
        std::make_shared<optimizers::CrossReplicaOptimizer>(adamw);
    if (fp16) {
      adamw->set_master_weights(true);
      optimizer = std::make_shared<optimizers::LossScalingOptimizer>(
          optimizer, loss_scaling);
    }
    return pipelining::OptimizerFunctionOutput{optimizer, out[0]};
  };
  ASSIGN_OR_RETURN(auto training, pipelining::Pipeline(root, std::move(t)));

  // Inference: the same blocks without the loss; device iterations become
  // the pipeline's micro-batches per call.
  ASSIGN_OR_RETURN(pipelining::BlockModel test_model, Network(params, false));
  ASSIGN_OR_RETURN(pipelining::PipelineOptions e,
                   Staged(test_model, strategy_name));
  e.name = "inference";
  e.gradient_accumulation_count = test_iterations;
  e.infeed_queue = test_feed.get();
  e.outfeed_queue = test_out.get();
  ASSIGN_OR_RETURN(auto inference, pipelining::Pipeline(root, std::move(e)));
  RETURN_IF_ERROR(strategy.Initialize(*root.graph()));

  // Training the model. The monitor thread takes each micro-batch's loss
  // and accuracy ([replicas] per step) from the outfeed as they arrive and
  // draws the progress bar; Run(strategy) returns replica 0's report.
  std::printf(
      "Training the ConvNet (B1-B4 on IPUs 0-3, %s) x %d replica(s) on %d "
      "IPUs, Fashion-MNIST: micro-batch %d x gradient accumulation %d x %d "
      "replica(s) = combined batch %d, %d device iterations, %d epoch(s), "
      "AdamW lr %g%s\n",
      strategy_name.c_str(), replicas, replicas * kStages, batch_size,
      accumulation, replicas, batch_size * accumulation * replicas,
      device_iterations, epochs, learning_rate,
      absl::GetFlag(FLAGS_offload_optimiser)
          ? (absl::GetFlag(FLAGS_replicated_optimizer_state_sharding)
                 ? ", optimizer state offloaded and sharded over the replicas"
                 : ", optimizer state offloaded")
          : "");
  std::fflush(stdout);
  const int64_t steps = train_calls * steps_per_call;
  examples::OutfeedMonitor monitor(train_out.get(), steps, replicas, "0", "1",
                                   /*window=*/50, examples::DrawProgress);
  pipelining::PipelineReport last_run;
  absl::Status status;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < train_calls && status.ok(); ++c) {
    absl::StatusOr<pipelining::PipelineReport> run = training->Run(strategy);
    if (run.ok()) {
      last_run = *std::move(run);
    } else {
      status = run.status();
    }
  }
  const double train_seconds = SecondsSince(start);
  monitor.Stop();
  RETURN_IF_ERROR(status);
  const int64_t micro_batches = steps * replicas;
  std::printf(
      "Trained %lld micro-batches (%lld weight updates) in %.1f s: %.0f "
      "images/s; last %d micro-batches: loss %.4f, accuracy %.2f%%\n",
      static_cast<long long>(micro_batches),
      static_cast<long long>(train_calls * device_iterations), train_seconds,
      micro_batches * batch_size / train_seconds,
      std::max(1, 50 / replicas) * replicas, monitor.mean_loss(),
      100 * monitor.mean_accuracy());
  // The executable the calls above ran (strategy's cache).
  ASSIGN_OR_RETURN(Executable * trained, strategy.Compile(*training));
  if (replicas > 1) RETURN_IF_ERROR(CheckReplicasAgree(*trained));
  if (fp16 && loss_scaling.method == optimizers::LossScalingMethod::kStatic) {
    std::printf("Loss scale: %g (static)\n", loss_scaling.loss_scaling);
  } else if (fp16) {
    // The automatic scale after the last weight update (one variable, the
    // same on every replica).
    ASSIGN_OR_RETURN(auto scale, trained->ReadVariables(".*LossScaling/scale"));
    for (const auto& [name, per_replica] : scale) {
      std::printf("Loss scale after training: %g ('%s')\n",
                  *per_replica[0].data<float>(), name.c_str());
    }
  }
  // Virtual clocks count each IPU's own CPU time: what R x 4 IPUs that do
  // not share the host's cores would take.
  std::printf(
      "Pipeline (replica 0, last call, virtual clocks): %.0f images/s "
      "on %d IPUs, bubble %.1f%% (theory %.1f%%), utilisation",
      last_run.micro_batches * replicas * batch_size / last_run.virtual_seconds,
      replicas * kStages, 100 * last_run.bubble,
      100 * last_run.theoretical_bubble);
  for (double u : last_run.ipu_utilisation) std::printf(" %.0f%%", 100 * u);
  std::printf("\n");

  // Inference: every replica tests its share; the outfeed holds one
  // accuracy per micro-batch per replica ([steps, replicas]).
  pipelining::PipelineReport test_run;
  const auto test_start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < test_calls; ++c) {
    ASSIGN_OR_RETURN(test_run, inference->Run(strategy));
  }
  const double test_seconds = SecondsSince(test_start);
  ASSIGN_OR_RETURN(feeds::OutfeedResult results, test_out->Dequeue());
  double correct = 0;
  for (float a : results["0"].span<float>()) correct += a * test_batch_size;
  const int64_t test_images = results["0"].NumElements() * test_batch_size;
  std::printf("Test accuracy: %.2f%% (%lld of %lld images, %.0f images/s)\n",
              100 * correct / test_images,
              static_cast<long long>(std::llround(correct)),
              static_cast<long long>(test_images), test_images / test_seconds);

  // The executable the training calls ran (the strategy's cache).
  ASSIGN_OR_RETURN(Executable * trained_exe, strategy.Compile(*training));
  if (absl::GetFlag(FLAGS_debug)) {
    std::printf(
        "\nTraining pipeline, last call:\n%s\nInference pipeline, last "
        "call:\n%s\nMemory per IPU (one replica):\n%s%s",
        last_run.Summary().c_str(), test_run.Summary().c_str(),
        trained_exe->MemoryReport().c_str(), system->TransferReport().c_str());
  }
  if (absl::GetFlag(FLAGS_profile)) {
    WriteProfile(ResolveOutputPath(absl::GetFlag(FLAGS_profile_dir)), last_run,
                 test_run, trained_exe->MemoryReport());
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ipuflow

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains the tutorial ConvNet on Fashion-MNIST, pipelined over four "
      "emulated IPUs (times --replication-factor replicas), then tests it.");
  ipuflow::ParseCommandLine(argc, argv);
  const absl::Status status = ipuflow::RunTutorial();
  if (!status.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "\n%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
