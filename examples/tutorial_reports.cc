#include "examples/tutorial_reports.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/ipu/ipu_system.h"
#include "core/machine_info.h"
#include "core/status.h"
#include "pipelining/trace.h"

namespace ipuflow::examples {

namespace {

// "2 replica(s)", or "1 replica(s) x 2 processes".
std::string ReplicasText(const TutorialFlags& f) {
  return f.processes > 1 ? absl::StrCat(f.replicas, " replica(s) x ",
                                        f.processes, " processes")
                         : absl::StrCat(f.replicas, " replica(s)");
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

}  // namespace

void PrintTestAccuracy(double correct, int64_t images, double seconds) {
  std::printf("Test accuracy: %.2f%% (%lld of %lld images, %.0f images/s)\n",
              100 * correct / images,
              static_cast<long long>(std::llround(correct)),
              static_cast<long long>(images), images / seconds);
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

std::string TrainingSummary(const TutorialFlags& f) {
  return absl::StrFormat(
      "Training the ConvNet (B1-B4 on IPUs 0-3, %s) x %s on %d "
      "IPUs%s, Fashion-MNIST: micro-batch %d x gradient accumulation %d "
      "x %s = combined batch %d, %d device iterations, %d epoch(s), "
      "AdamW lr %g%s\n",
      f.strategy, ReplicasText(f), f.replicas * kStages,
      f.processes > 1 ? " per process" : "", f.batch_size,
      f.gradient_accumulation, ReplicasText(f),
      f.batch_size * f.gradient_accumulation * f.replicas * f.processes,
      f.device_iterations, f.epochs, f.learning_rate,
      f.offload_optimiser
          ? (f.replicated_optimizer_state_sharding
                 ? ", optimizer state offloaded and sharded over the replicas"
                 : ", optimizer state offloaded")
          : "");
}

void PrintTrainingSummary(const TutorialFlags& f) {
  // The machine first: the results' last digits depend on the ISA the
  // kernels chose (docs/BENCHMARKS.md), the images/s on the CPU.
  std::printf("Machine: %s\n%s", MachineDescription().c_str(),
              TrainingSummary(f).c_str());
  std::fflush(stdout);
}

absl::Status ReportTraining(const TutorialFlags& f, int64_t calls,
                            double seconds, const OutfeedMonitor& monitor,
                            const pipelining::Pipeline& training,
                            const Executable& trained) {
  const int64_t weight_updates = calls * f.device_iterations;
  const int64_t micro_batches =
      weight_updates * f.gradient_accumulation * f.replicas * f.processes;
  std::printf(
      "Trained %lld micro-batches (%lld weight updates) in %.1f s: %.0f "
      "images/s; last %d micro-batches: loss %.4f, accuracy %.2f%%\n",
      static_cast<long long>(micro_batches),
      static_cast<long long>(weight_updates), seconds,
      micro_batches * f.batch_size / seconds, monitor.window_micro_batches(),
      monitor.mean_loss(), 100 * monitor.mean_accuracy());
  if (f.replicas > 1) RETURN_IF_ERROR(CheckReplicasAgree(trained));
  RETURN_IF_ERROR(PrintLossScale(f, trained));
  PrintPipelineReport(
      f, training.last_report().value_or(pipelining::PipelineReport{}));
  return absl::OkStatus();
}

namespace {

absl::Status WriteProfile(const std::string& dir,
                          const pipelining::PipelineReport& train,
                          const pipelining::PipelineReport& test,
                          const std::string& memory) {
  using namespace pipelining;
  RETURN_IF_ERROR(PrepareProfileDir(dir));
  auto write = [&](const std::string& file,
                   const std::string& text) -> absl::Status {
    const std::string path = dir + "/" + file;
    std::ofstream out(path);
    out << text;
    out.close();
    if (!out) {
      return absl::PermissionDeniedError(absl::StrCat(
          "--profile: could not write '", path, "': ", std::strerror(errno)));
    }
    return absl::OkStatus();
  };
  SvgOptions train_svg, test_svg;
  train_svg.title = absl::StrCat("Training: ", train.repeats,
                                 " pipeline runs (virtual clocks)");
  test_svg.title = "Inference (virtual clocks)";
  RETURN_IF_ERROR(write("train_trace.json", ToChromeTraceJson(train.items)));
  RETURN_IF_ERROR(write("train_trace_wall.json",
                        ToChromeTraceJson(train.wall_items, "wall clock")));
  RETURN_IF_ERROR(
      write("train_timeline.svg", ToSvgTimeline(train.items, train_svg)));
  RETURN_IF_ERROR(write("test_trace.json", ToChromeTraceJson(test.items)));
  RETURN_IF_ERROR(
      write("test_timeline.svg", ToSvgTimeline(test.items, test_svg)));
  RETURN_IF_ERROR(write(
      "summary.txt", absl::StrCat("Training (last call)\n", train.Summary(),
                                  "\nInference (last call)\n", test.Summary(),
                                  "\nMemory\n", memory)));
  std::printf(
      "Wrote the profile to %s/ (train_trace.json, train_timeline.svg, "
      "test_trace.json, test_timeline.svg, summary.txt)\n",
      dir.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareProfileDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat(
        "--profile: could not create '", dir, "': ", error.message()));
  }
  // A file that can be made there now can be written after training.
  const std::string probe = dir + "/.write_test";
  {
    std::ofstream out(probe);
    out << "ok";
    out.close();
    if (!out) {
      return absl::PermissionDeniedError(absl::StrCat(
          "--profile: could not write in '", dir, "': ", std::strerror(errno)));
    }
  }
  std::filesystem::remove(probe, error);
  return absl::OkStatus();
}

absl::Status WriteReports(const TutorialFlags& f,
                          const pipelining::Pipeline& training,
                          const pipelining::Pipeline& inference,
                          const Executable& trained, const IPUSystem& system) {
  const pipelining::PipelineReport train =
      training.last_report().value_or(pipelining::PipelineReport{});
  const pipelining::PipelineReport test =
      inference.last_report().value_or(pipelining::PipelineReport{});
  if (f.debug) {
    std::printf(
        "\nTraining pipeline, last call:\n%s\nInference pipeline, last "
        "call:\n%s\nMemory per IPU (one replica):\n%s%s",
        train.Summary().c_str(), test.Summary().c_str(),
        trained.MemoryReport().c_str(), system.TransferReport().c_str());
  }
  if (f.profile) {
    RETURN_IF_ERROR(
        WriteProfile(f.profile_dir, train, test, trained.MemoryReport()));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::examples
