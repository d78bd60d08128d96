// The DataLoader on the main example's data (Fashion-MNIST's 60,000
// training images, shuffled; combined batch 40 x 10 device iterations x 1
// replica x 10 gradient accumulation = 4,000 images), in each mode:
//
//   loader alone     Next() as fast as it goes: what the loader can supply.
//   with a consumer  after each Next() the consumer works for about as long
//                    as one combined batch takes to assemble (a fixed number
//                    of passes over the batch, like a device reading it):
//                    Sync adds the two, the async modes overlap them.
//
// Modes run interleaved, round after round, so that machine load falls on
// all of them alike; the report gives the median of the rounds and each
// mode's ratio to Sync measured in the same rounds. Besides the rate over
// all epochs (the first one reads and caches the samples), it gives the
// rate of the epochs after the first (only assembling batches) and the
// process's minor page faults per Next() (a fresh 12.5 MB batch costs about
// 3,000).
//
//   ./bazelw run //feeds:data_loader_benchmark -- --rounds=5 --epochs=2
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/machine_info.h"
#include "core/status.h"
#include "feeds/data_loader.h"
#include "feeds/fashion_mnist.h"

ABSL_FLAG(int, rounds, 5, "interleaved rounds per mode");
ABSL_FLAG(int, epochs, 2, "epochs per round (15 steps each)");
ABSL_FLAG(int, consumer_passes, 0,
          "passes over each batch the consumer makes (0: calibrated to one "
          "batch's assembly time)");

namespace ipuflow::feeds {
namespace {

struct Mode {
  const char* name;
  DataLoaderMode mode;
  int workers;
};

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// What a consumer does with a batch: `passes` sums over its images.
float Consume(const Element& batch, int passes) {
  float acc = 0;
  const float* p = batch[0].data<float>();
  const int64_t n = batch[0].NumElements();
  for (int k = 0; k < passes; ++k) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    acc += s;
  }
  return acc;
}

int64_t MinorFaults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Rates {
  double all = 0;     // Images per second, every epoch.
  double later = 0;   // Images per second, the epochs after the first.
  double faults = 0;  // Minor page faults per Next(), every epoch.
};

// Over `epochs` epochs of a fresh loader (the first epoch's caching of the
// samples included, as a training run sees it).
absl::StatusOr<Rates> Measure(const DatasetPtr& samples, const Mode& m,
                              int epochs, int passes, float* sink) {
  DataLoaderOptions o;
  o.batch_size = 40;
  o.device_iterations = 10;
  o.gradient_accumulation = 10;
  o.shuffle = true;
  o.seed = 42;
  o.mode = m.mode;
  o.num_workers = m.workers;
  const int64_t faults0 = MinorFaults();
  const auto t0 = std::chrono::steady_clock::now();
  auto t1 = t0;
  ASSIGN_OR_RETURN(auto loader, DataLoader::Create(samples, o));
  int64_t images = 0, later = 0, steps = 0;
  for (int e = 0; e < epochs; ++e) {
    if (e > 0) loader->StartNextEpoch();
    if (e == 1) t1 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < loader->len(); ++s) {
      ASSIGN_OR_RETURN(Element batch, loader->Next());
      *sink += Consume(batch, passes);
      images += batch[0].dim(0);
      if (e > 0) later += batch[0].dim(0);
      ++steps;
    }
  }
  Rates r;
  r.all = images / Seconds(t0);
  r.later = epochs > 1 ? later / Seconds(t1) : 0;
  r.faults = static_cast<double>(MinorFaults() - faults0) / steps;
  return r;
}

int Main() {
  std::printf("%s\n", MachineDescription().c_str());
  absl::StatusOr<FashionMnistData> data = LoadFashionMnist(Split::kTrain);
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
    return 1;
  }
  const DatasetPtr samples = FromTensorSlices({data->images, data->labels});
  const std::vector<Mode> modes = {
      {"sync", DataLoaderMode::kSync, 1},
      {"async, 1 worker", DataLoaderMode::kAsync, 1},
      {"async, 2 workers", DataLoaderMode::kAsync, 2},
      {"rebatched, 1 worker", DataLoaderMode::kAsyncRebatched, 1},
  };
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int epochs = absl::GetFlag(FLAGS_epochs);
  float sink = 0;

  // Calibration: passes over a batch that take about as long as the loader
  // takes to assemble it in Sync mode.
  int passes = absl::GetFlag(FLAGS_consumer_passes);
  if (passes <= 0) {
    absl::StatusOr<Rates> sync = Measure(samples, modes[0], 1, 0, &sink);
    if (!sync.ok()) {
      std::fprintf(stderr, "%s\n", sync.status().ToString().c_str());
      return 1;
    }
    Element probe = {Tensor::Filled(DType::kFloat32, {4000, 28, 28, 1}, 1)};
    const auto t0 = std::chrono::steady_clock::now();
    sink += Consume(probe, 10);
    const double per_pass = Seconds(t0) / 10;
    passes = std::max(1, static_cast<int>(4000 / sync->all / per_pass + 0.5));
  }
  std::printf(
      "Fashion-MNIST train, 60000 images, shuffled; combined batch "
      "4000 (40 x 10 x 1 x 10); %d round(s) of %d epoch(s); consumer "
      "%d pass(es) per batch\n",
      rounds, epochs, passes);

  for (int consumer : {0, 1}) {
    std::vector<std::vector<double>> rate(modes.size()), ratio(modes.size()),
        later(modes.size()), faults(modes.size());
    for (int r = 0; r < rounds; ++r) {
      double sync = 0;
      for (size_t i = 0; i < modes.size(); ++i) {
        absl::StatusOr<Rates> v =
            Measure(samples, modes[i], epochs, consumer ? passes : 0, &sink);
        if (!v.ok()) {
          std::fprintf(stderr, "%s: %s\n", modes[i].name,
                       v.status().ToString().c_str());
          return 1;
        }
        if (i == 0) sync = v->all;
        rate[i].push_back(v->all);
        ratio[i].push_back(v->all / sync);
        later[i].push_back(v->later);
        faults[i].push_back(v->faults);
      }
    }
    std::printf("\n%s (medians of %d)\n",
                consumer ? "with a consumer" : "loader alone", rounds);
    auto median = [](std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (size_t i = 0; i < modes.size(); ++i) {
      std::printf(
          "  %-22s %9.0f images/s   x%.2f vs sync; epochs after the "
          "first %9.0f images/s; %6.0f page faults per Next()\n",
          modes[i].name, median(rate[i]), median(ratio[i]), median(later[i]),
          median(faults[i]));
    }
  }
  return sink == 12345.f ? 2 : 0;  // Keeps the consumer's work.
}

}  // namespace
}  // namespace ipuflow::feeds

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ipuflow::feeds::Main();
}
