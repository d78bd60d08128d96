#include "examples/tutorial_flags.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/command_line.h"
#include "core/option_checks.h"
#include "core/status.h"

// Setting hyperparameters: the tutorial's defaults.
ABSL_FLAG(int, batch_size, 40, "micro-batch size for training");
ABSL_FLAG(int, device_iterations, 10,
          "weight updates per host call (pipeline runs per call)");
ABSL_FLAG(std::optional<int>, gradient_accumulation, std::nullopt,
          "micro-batches per weight update on each replica (the pipeline's "
          "gradient_accumulation_count), 1 to 65536; unset: 10 / "
          "--replication-factor, which keeps the combined batch per weight "
          "update, batch-size x gradient-accumulation x replication-factor, "
          "at 400");
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
ABSL_FLAG(std::string, schedule, "grouped",
          "the training pipeline's schedule with --strategy=pipelined: "
          "grouped, interleaved (Graphcore's), gpipe, 1f1b, interleaved1f1b "
          "or loopedbfs (torch.distributed.pipelining's, one stage per IPU; "
          "docs/PIPELINING.md)");
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
ABSL_FLAG(int64_t, train_limit, -1,
          "use only the first N training images (-1: all)");
ABSL_FLAG(int64_t, test_limit, -1,
          "use only the first N test images (-1: all)");
ABSL_FLAG(int64_t, seed, 0, "initial weights and shuffle order (>= 0)");
ABSL_FLAG(std::string, loader_mode, "async",
          "how the DataLoader prepares combined batches: sync (on the infeed's "
          "thread), async (background workers, PopTorch's "
          "DataLoaderMode.Async) or rebatched (AsyncRebatched)");
ABSL_FLAG(int, loader_workers, 1, "the DataLoader's worker threads");
ABSL_FLAG(int, intra_op_threads, 0,
          "worker threads per IPU for kernels, besides the IPU's own "
          "(IPUConfig.intra_op_threads_per_ipu; 0: cores / IPUs - 1); the "
          "results do not depend on it");
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
          "with --precision fp16: automatic (PopTorch's histogram rule) or a "
          "number (a static scale, at most 2^24)");

// Checkpoints (docs/CHECKPOINTS.md): saved between training calls.
ABSL_FLAG(std::string, checkpoint_dir, "",
          "where checkpoints are written (ckpt-<weight updates>.ipuckpt) and "
          "--resume reads them; empty: no checkpoints. With a directory, a "
          "checkpoint is also saved after the last weight update");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "save a checkpoint every N weight updates: a multiple of "
          "--device-iterations, the weight updates of one training call "
          "(checkpoints are taken between calls); 0: only at the end");
ABSL_FLAG(int, keep_checkpoints, 3,
          "how many of the newest checkpoints --checkpoint-dir keeps");
ABSL_FLAG(bool, resume, false,
          "continue from the newest checkpoint of --checkpoint-dir, exactly "
          "where it stopped (weights, optimizer state, random streams, data "
          "order); starts from the beginning when there is none");
ABSL_FLAG(int64_t, stop_after, 0,
          "stop after N weight updates in all (a multiple of "
          "--device-iterations), saving a checkpoint there, without testing; "
          "0: train every epoch");

namespace ipuflow::examples {
namespace {

constexpr int kOneReplicaAccumulation = 10;
constexpr int kMaxIpus = 64;  // An IPU-POD64.
constexpr int kMaxReplicas = kMaxIpus / kStages;
// Upper bounds of the flags: what one host can emulate in memory and in a
// session, well inside the int fields and the loaders' own limits.
constexpr int kMaxBatchSize = 1 << 16;
constexpr int kMaxIterations = 1 << 20;
constexpr int kMaxAccumulation = 1 << 16;
constexpr int kMaxEpochs = 1 << 16;
constexpr int kMaxLoaderWorkers = 64;
constexpr double kMaxLearningRate = 1e3;
constexpr double kMaxLossScale = 1 << 24;
// Products: images per weight update (the combined batch) and per host call.
constexpr int64_t kMaxCombinedBatch = int64_t{1} << 24;
constexpr int64_t kMaxImagesPerCall = int64_t{1} << 30;
// Automatic loss scaling's first scale; it halves or doubles after every
// weight update (PopART's rule) from there.
constexpr float kInitialLossScale = 128.f;
constexpr int kMaxKeptCheckpoints = 1000;
constexpr int64_t kMaxWeightUpdates = int64_t{1} << 40;

// The gradient accumulation per replica: the flag's, or the one that keeps
// one replica's combined batch. `replicas` is in [1, kMaxReplicas].
// InvalidArgument naming replicas, stages and IPUs when the default cannot
// be used or the pipeline cannot fill.
absl::StatusOr<int> GradientAccumulation(int replicas, int processes,
                                         std::optional<int> requested,
                                         bool pipelined) {
  const std::string layout =
      absl::StrCat(replicas, " replicas x ", kStages,
                   " stages = ", replicas * kStages, " IPUs");
  int accumulation = 0;
  if (requested.has_value()) {
    accumulation = *requested;
  } else {
    // Every process's replicas share the combined batch.
    const int64_t global = int64_t{replicas} * processes;
    if (kOneReplicaAccumulation % global != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--replication-factor ", replicas, " (", layout, ")",
          processes > 1 ? absl::StrCat(" x ", processes, " processes") : "",
          ": the default gradient accumulation keeps the combined batch of "
          "one replica by accumulating ",
          kOneReplicaAccumulation, " / replicas micro-batches on each, and ",
          kOneReplicaAccumulation, " is not a multiple of ", global,
          "; use 1 or 2 replicas in all, or pass --gradient-accumulation"));
    }
    accumulation = kOneReplicaAccumulation / static_cast<int>(global);
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
  return accumulation;
}

// --checkpoint-dir, --checkpoint-every, --keep-checkpoints, --resume and
// --stop-after into `f`: checkpoints are taken between training calls, so
// the weight-update counts must be whole calls of `per_call`.
void CheckCheckpointFlags(int per_call, TutorialFlags* f,
                          OptionChecker* check) {
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  f->checkpoint_dir = dir.empty() ? "" : ResolveOutputPath(dir);
  f->checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  f->keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  f->resume = absl::GetFlag(FLAGS_resume);
  f->stop_after = absl::GetFlag(FLAGS_stop_after);
  check->Range("--keep-checkpoints", f->keep_checkpoints, 1,
               kMaxKeptCheckpoints);
  for (auto [name, n] : {std::pair<const char*, int64_t>{"--checkpoint-every",
                                                         f->checkpoint_every},
                         {"--stop-after", f->stop_after}}) {
    check->Range(name, n, 0, kMaxWeightUpdates, " weight updates");
    if (n > 0 && per_call > 0 && n % per_call != 0) {
      check->Fail(
          absl::StrCat(name, " is ", n,
                       " weight updates, not a multiple of "
                       "--device-iterations (",
                       per_call, "): one training call does ", per_call,
                       " weight updates and checkpoints are taken between "
                       "calls; use ",
                       (n / per_call) * per_call > 0
                           ? absl::StrCat((n / per_call) * per_call, " or ")
                           : "",
                       (n / per_call + 1) * per_call));
    }
  }
  if (f->checkpoint_dir.empty()) {
    if (f->checkpoint_every > 0) {
      check->Fail("--checkpoint-every needs --checkpoint-dir");
    }
    if (f->resume) check->Fail("--resume needs --checkpoint-dir");
  }
}

// The example's own flags (ParseTutorialFlagArgs sets no other).
constexpr const char* kTutorialFlagNames[] = {
    "batch_size",
    "device_iterations",
    "gradient_accumulation",
    "replication_factor",
    "test_batch_size",
    "test_device_iterations",
    "epochs",
    "learning_rate",
    "strategy",
    "schedule",
    "offload_optimiser",
    "replicated_optimizer_state_sharding",
    "profile",
    "profile_dir",
    "debug",
    "train_limit",
    "test_limit",
    "seed",
    "loader_mode",
    "loader_workers",
    "intra_op_threads",
    "precision",
    "stochastic_rounding",
    "loss_scaling",
    "checkpoint_dir",
    "checkpoint_every",
    "keep_checkpoints",
    "resume",
    "stop_after",
};

bool IsTutorialFlag(absl::string_view name) {
  for (const char* n : kTutorialFlagNames) {
    if (name == n) return true;
  }
  return false;
}

// Reads Abseil's flags (as the command line set them) and checks them all.
absl::StatusOr<TutorialFlags> FlagsFromAbsl(int processes = 1) {
  TutorialFlags f;
  f.processes = processes;
  OptionChecker check("train_fashion_mnist flags");
  f.batch_size = absl::GetFlag(FLAGS_batch_size);
  check.Range("--batch-size", f.batch_size, 1, kMaxBatchSize);
  f.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  check.Range("--device-iterations", f.device_iterations, 1, kMaxIterations);
  f.test_batch_size = absl::GetFlag(FLAGS_test_batch_size);
  check.Range("--test-batch-size", f.test_batch_size, 1, kMaxBatchSize);
  f.test_iterations = absl::GetFlag(FLAGS_test_device_iterations);
  check.Range("--test-device-iterations", f.test_iterations, 1, kMaxIterations);
  f.epochs = absl::GetFlag(FLAGS_epochs);
  check.Range("--epochs", f.epochs, 1, kMaxEpochs);
  const double lr = absl::GetFlag(FLAGS_learning_rate);
  check.FiniteRange("--learning-rate", lr, 0, kMaxLearningRate);
  f.learning_rate = static_cast<float>(lr);
  f.replicas = absl::GetFlag(FLAGS_replication_factor);
  check.Range(
      "--replication-factor", f.replicas, 1, kMaxReplicas,
      absl::StrCat(" replicas (each replica is the ", kStages,
                   "-stage pipeline on its own ", kStages, " IPUs: replicas x ",
                   kStages, " stages at most ", kMaxIpus, " IPUs)"));
  const std::optional<int> accumulation =
      absl::GetFlag(FLAGS_gradient_accumulation);
  if (accumulation.has_value()) {
    check.Range("--gradient-accumulation", *accumulation, 1, kMaxAccumulation);
  }
  f.loader_workers = absl::GetFlag(FLAGS_loader_workers);
  check.Range("--loader-workers", f.loader_workers, 1, kMaxLoaderWorkers);
  f.intra_op_threads = absl::GetFlag(FLAGS_intra_op_threads);
  check.Range("--intra-op-threads", f.intra_op_threads, 0,
              kMaxIntraOpThreadsPerIpu);
  f.train_limit = absl::GetFlag(FLAGS_train_limit);
  f.test_limit = absl::GetFlag(FLAGS_test_limit);
  for (auto [name, limit] :
       {std::pair<const char*, int64_t>{"--train-limit", f.train_limit},
        {"--test-limit", f.test_limit}}) {
    if (limit == 0 || limit < -1) {
      check.Fail(absl::StrCat(name, " is ", limit,
                              "; it must be -1 (every image) or between 1 "
                              "and ",
                              std::numeric_limits<int64_t>::max()));
    }
  }
  f.seed = absl::GetFlag(FLAGS_seed);
  check.Range("--seed", f.seed, 0, std::numeric_limits<int64_t>::max());
  f.strategy = absl::GetFlag(FLAGS_strategy);
  if (f.strategy != "pipelined" && f.strategy != "sharded") {
    check.Fail(absl::StrCat("--strategy is '", f.strategy,
                            "'; it must be pipelined or sharded"));
  }
  const std::string schedule = absl::GetFlag(FLAGS_schedule);
  absl::StatusOr<pipelining::PipelineSchedule> kind =
      pipelining::PipelineScheduleFromName(schedule);
  if (!kind.ok() || *kind == pipelining::PipelineSchedule::kSequential ||
      *kind == pipelining::PipelineSchedule::kCustom) {
    check.Fail(absl::StrCat("--schedule is '", schedule,
                            "'; it must be grouped, interleaved, gpipe, 1f1b, "
                            "interleaved1f1b or loopedbfs (--strategy=sharded "
                            "is the Sequential schedule)"));
  } else if (!f.pipelined() &&
             *kind != pipelining::PipelineSchedule::kGrouped) {
    check.Fail(absl::StrCat("--schedule is '", schedule,
                            "' with --strategy=sharded, whose schedule is "
                            "Sequential: use --strategy=pipelined"));
  } else {
    f.schedule = *kind;
  }
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "fp32" && precision != "fp16") {
    check.Fail(absl::StrCat("--precision is '", precision,
                            "'; it must be fp32 or fp16"));
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
    check.Fail(absl::StrCat("--stochastic-rounding is '", sr,
                            "'; it must be replica_identical_only, on or "
                            "off"));
  }
  f.loss_scaling = optimizers::LossScaling::Automatic(kInitialLossScale);
  if (const std::string ls = absl::GetFlag(FLAGS_loss_scaling);
      ls == "gradscaler") {
    // Not advertised: the example always pipelines (sharded is the
    // Sequential schedule), and GradScaler's skipped steps are not
    // supported in a pipeline (docs/PIPELINING.md).
    check.Fail(
        "--loss-scaling is 'gradscaler': PyTorch's GradScaler skips the "
        "weight updates whose gradients overflow, which a pipeline does not "
        "support; use automatic (PopTorch's rule, which also backs off on "
        "overflow) or a static number");
  } else if (ls != "automatic") {
    double scale = 0;
    if (!absl::SimpleAtod(ls, &scale)) {
      check.Fail(absl::StrCat("--loss-scaling is '", ls,
                              "'; it must be automatic or a number between "
                              "0 (excluded) and ",
                              static_cast<int64_t>(kMaxLossScale)));
    } else if (scale == 0) {
      check.Fail(
          absl::StrCat("--loss-scaling is 0; a static scale must be "
                       "a finite number between 0 (excluded) and ",
                       static_cast<int64_t>(kMaxLossScale)));
    } else {
      check.FiniteRange("--loss-scaling", scale, 0, kMaxLossScale);
    }
    f.loss_scaling = optimizers::LossScaling::Static(static_cast<float>(scale));
  }
  if (const std::string mode = absl::GetFlag(FLAGS_loader_mode);
      mode == "sync") {
    f.loader_mode = feeds::DataLoaderMode::kSync;
  } else if (mode == "async") {
    f.loader_mode = feeds::DataLoaderMode::kAsync;
  } else if (mode == "rebatched") {
    f.loader_mode = feeds::DataLoaderMode::kAsyncRebatched;
  } else {
    check.Fail(absl::StrCat("--loader-mode is '", mode,
                            "'; it must be sync, async or rebatched"));
  }
  f.offload_optimiser = absl::GetFlag(FLAGS_offload_optimiser);
  f.replicated_optimizer_state_sharding =
      absl::GetFlag(FLAGS_replicated_optimizer_state_sharding);
  f.profile = absl::GetFlag(FLAGS_profile);
  if (f.profile) {
    const std::string dir = absl::GetFlag(FLAGS_profile_dir);
    if (dir.empty()) check.Fail("--profile-dir is empty; --profile needs one");
    f.profile_dir = ResolveOutputPath(dir);
  }
  f.debug = absl::GetFlag(FLAGS_debug);
  CheckCheckpointFlags(f.device_iterations, &f, &check);
  RETURN_IF_ERROR(check.status());
  // The layout, once replicas are in range.
  ASSIGN_OR_RETURN(f.gradient_accumulation,
                   GradientAccumulation(f.replicas, f.processes, accumulation,
                                        f.pipelined()));
  OptionChecker products("train_fashion_mnist flags");
  const int64_t combined =
      products.Product({{"--batch-size", f.batch_size},
                        {"--gradient-accumulation", f.gradient_accumulation},
                        {"--replication-factor", f.replicas}},
                       kMaxCombinedBatch, " images per weight update");
  if (combined > 0) {
    products.Product({{"the combined batch", combined},
                      {"--device-iterations", f.device_iterations}},
                     kMaxImagesPerCall, " images per training call");
  }
  products.Product({{"--test-batch-size", f.test_batch_size},
                    {"--test-device-iterations", f.test_iterations},
                    {"--replication-factor", f.replicas}},
                   kMaxImagesPerCall, " images per inference call");
  RETURN_IF_ERROR(products.status());
  return f;
}

}  // namespace

absl::StatusOr<TutorialFlags> ParseTutorialFlags(int argc, char** argv,
                                                 int processes) {
  absl::SetProgramUsageMessage(
      "Trains the tutorial ConvNet on Fashion-MNIST, pipelined over four "
      "emulated IPUs (times --replication-factor replicas), then tests it.");
  ParseCommandLine(argc, argv);
  return FlagsFromAbsl(processes);
}

absl::StatusOr<TutorialFlags> ParseTutorialFlagArgs(
    const std::vector<std::string>& args) {
  // The flags are process-wide: leave them as found. (Not absl::FlagSaver,
  // which logs a line per flag it restores: the fuzzer calls this a
  // million times.)
  struct Restore {
    ~Restore() {
      std::string ignored;
      for (const auto& [flag, value] : saved) flag->ParseFrom(value, &ignored);
    }
    std::vector<std::pair<absl::CommandLineFlag*, std::string>> saved;
  } restore;
  for (const char* name : kTutorialFlagNames) {
    if (absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name)) {
      restore.saved.push_back({flag, flag->CurrentValue()});
    }
  }
  std::vector<std::string> argv = {"train_fashion_mnist"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv = DashesToUnderscores(std::move(argv));
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", arg, "' is not a flag (the example takes no arguments)"));
    }
    std::string name(arg), value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
      has_value = true;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no") && !has_value) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      negated = flag != nullptr && flag->IsOfType<bool>();
      if (!negated) flag = nullptr;
    }
    if (flag == nullptr || !IsTutorialFlag(flag->Name())) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (negated) {
        value = "false";
      } else if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " is missing its value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", flag->Name(), ": '", value, "': ", error));
    }
  }
  return FlagsFromAbsl();
}

feeds::DataLoaderOptions LoaderOptions(const TutorialFlags& f, bool training,
                                       int process_index) {
  feeds::DataLoaderOptions o;
  o.mode = f.loader_mode;
  o.num_workers = f.loader_workers;
  o.replicas = f.replicas;
  o.process_index = process_index;
  o.process_count = f.processes;
  if (training) {
    o.batch_size = f.batch_size;
    o.device_iterations = f.device_iterations;
    o.gradient_accumulation = f.gradient_accumulation;
    o.shuffle = true;
    o.seed = 42 + static_cast<uint64_t>(f.seed);
  } else {
    o.batch_size = f.test_batch_size;
    o.device_iterations = f.test_iterations;
  }
  return o;
}

}  // namespace ipuflow::examples
