#include "examples/tutorial_flags.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/command_line.h"
#include "core/status.h"
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

namespace ipuflow::examples {
namespace {

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

}  // namespace

absl::StatusOr<TutorialFlags> ParseTutorialFlags(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains the tutorial ConvNet on Fashion-MNIST, pipelined over four "
      "emulated IPUs (times --replication-factor replicas), then tests it.");
  ParseCommandLine(argc, argv);
  TutorialFlags f;
  f.batch_size = absl::GetFlag(FLAGS_batch_size);
  f.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  f.test_batch_size = absl::GetFlag(FLAGS_test_batch_size);
  f.test_iterations = absl::GetFlag(FLAGS_test_device_iterations);
  f.epochs = absl::GetFlag(FLAGS_epochs);
  f.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  f.strategy = absl::GetFlag(FLAGS_strategy);
  if (f.strategy != "pipelined" && f.strategy != "sharded") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy must be pipelined or sharded, got '", f.strategy, "'"));
  }
  if (f.batch_size < 1 || f.device_iterations < 1 || f.test_batch_size < 1 ||
      f.test_iterations < 1 || f.epochs < 1) {
    return absl::InvalidArgumentError(
        "--batch-size, --device-iterations, --test-batch-size, "
        "--test-device-iterations and --epochs must be positive");
  }
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "fp32" && precision != "fp16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision must be fp32 or fp16, got '", precision, "'"));
  }
  f.fp16 = precision == "fp16";
  if (const std::string sr = absl::GetFlag(FLAGS_stochastic_rounding);
      sr == "on") {
    f.esr = FloatingPointBehaviourConfig::ON;
  } else if (sr == "off") {
    f.esr = FloatingPointBehaviourConfig::OFF;
  } else if (sr == "replica_identical_only") {
    f.esr = FloatingPointBehaviourConfig::REPLICA_IDENTICAL_ONLY;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stochastic-rounding must be replica_identical_only, on or off, "
        "got '",
        sr, "'"));
  }
  f.loss_scaling = optimizers::LossScaling::Automatic(kInitialLossScale);
  if (const std::string ls = absl::GetFlag(FLAGS_loss_scaling);
      ls == "gradscaler") {
    f.loss_scaling = optimizers::LossScaling::GradScaler();
  } else if (ls != "automatic") {
    float scale = 0;
    if (!absl::SimpleAtof(ls, &scale) || !(scale > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--loss-scaling must be automatic, gradscaler or a positive number, "
          "got '",
          ls, "'"));
    }
    f.loss_scaling = optimizers::LossScaling::Static(scale);
  }
  f.replicas = absl::GetFlag(FLAGS_replication_factor);
  ASSIGN_OR_RETURN(f.gradient_accumulation,
                   GradientAccumulation(
                       f.replicas, absl::GetFlag(FLAGS_gradient_accumulation),
                       f.pipelined()));
  if (const std::string mode = absl::GetFlag(FLAGS_loader_mode);
      mode == "sync") {
    f.loader_mode = feeds::DataLoaderMode::kSync;
  } else if (mode == "async") {
    f.loader_mode = feeds::DataLoaderMode::kAsync;
  } else if (mode == "rebatched") {
    f.loader_mode = feeds::DataLoaderMode::kAsyncRebatched;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loader-mode must be sync, async or rebatched, got '", mode, "'"));
  }
  f.loader_workers = absl::GetFlag(FLAGS_loader_workers);
  f.offload_optimiser = absl::GetFlag(FLAGS_offload_optimiser);
  f.replicated_optimizer_state_sharding =
      absl::GetFlag(FLAGS_replicated_optimizer_state_sharding);
  f.profile = absl::GetFlag(FLAGS_profile);
  if (f.profile)
    f.profile_dir = ResolveOutputPath(absl::GetFlag(FLAGS_profile_dir));
  f.debug = absl::GetFlag(FLAGS_debug);
  f.train_limit = absl::GetFlag(FLAGS_train_limit);
  f.test_limit = absl::GetFlag(FLAGS_test_limit);
  f.seed = absl::GetFlag(FLAGS_seed);
  return f;
}

std::string TrainingSummary(const TutorialFlags& f) {
  return absl::StrFormat(
      "Training the ConvNet (B1-B4 on IPUs 0-3, %s) x %d replica(s) on %d "
      "IPUs, Fashion-MNIST: micro-batch %d x gradient accumulation %d x %d "
      "replica(s) = combined batch %d, %d device iterations, %d epoch(s), "
      "AdamW lr %g%s\n",
      f.strategy, f.replicas, f.replicas * kStages, f.batch_size,
      f.gradient_accumulation, f.replicas,
      f.batch_size * f.gradient_accumulation * f.replicas, f.device_iterations,
      f.epochs, f.learning_rate,
      f.offload_optimiser
          ? (f.replicated_optimizer_state_sharding
                 ? ", optimizer state offloaded and sharded over the replicas"
                 : ", optimizer state offloaded")
          : "");
}

void PrintDataLoader(const TutorialFlags& f,
                     const feeds::DataLoader& train_loader) {
  std::printf(
      "DataLoader (%s, %d worker(s)): combined batch %d x %d device "
      "iterations x %d replica(s) x %d gradient accumulation = %lld "
      "images per host call, %lld calls per epoch (%lld images left "
      "for the next epoch)\n",
      feeds::DataLoaderModeName(f.loader_mode).c_str(), f.loader_workers,
      f.batch_size, f.device_iterations, f.replicas, f.gradient_accumulation,
      static_cast<long long>(train_loader.combined_batch_size()),
      static_cast<long long>(train_loader.len()),
      static_cast<long long>(train_loader.unused_samples_per_epoch()));
}

absl::Status PrintLossScale(const TutorialFlags& f, const Executable& trained) {
  if (!f.fp16) return absl::OkStatus();
  if (f.loss_scaling.method == optimizers::LossScalingMethod::kStatic) {
    std::printf("Loss scale: %g (static)\n", f.loss_scaling.loss_scaling);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto scale, trained.ReadVariables(".*LossScaling/scale"));
  for (const auto& [name, per_replica] : scale) {
    std::printf("Loss scale after training: %g ('%s')\n",
                *per_replica[0].data<float>(), name.c_str());
  }
  return absl::OkStatus();
}

void PrintPipelineReport(const TutorialFlags& f,
                         const pipelining::PipelineReport& last_run) {
  std::printf(
      "Pipeline (replica 0, last call, virtual clocks): %.0f images/s "
      "on %d IPUs, bubble %.1f%% (theory %.1f%%), utilisation",
      last_run.micro_batches * f.replicas * f.batch_size /
          last_run.virtual_seconds,
      f.replicas * kStages, 100 * last_run.bubble,
      100 * last_run.theoretical_bubble);
  for (double u : last_run.ipu_utilisation) std::printf(" %.0f%%", 100 * u);
  std::printf("\n");
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

namespace {

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

}  // namespace

void WriteReports(const TutorialFlags& f,
                  const pipelining::PipelineReport& train,
                  const pipelining::PipelineReport& test,
                  const Executable& trained, const IPUSystem& system) {
  if (f.debug) {
    std::printf(
        "\nTraining pipeline, last call:\n%s\nInference pipeline, last "
        "call:\n%s\nMemory per IPU (one replica):\n%s%s",
        train.Summary().c_str(), test.Summary().c_str(),
        trained.MemoryReport().c_str(), system.TransferReport().c_str());
  }
  if (f.profile) {
    WriteProfile(f.profile_dir, train, test, trained.MemoryReport());
  }
}

}  // namespace ipuflow::examples
