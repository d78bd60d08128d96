// Fuzz target: the public options structs and the main example's flag
// parser (issue 22). The first byte picks the surface; the rest are its
// values: the flag parser reads newline-separated arguments, the structs
// read their fields as raw little-endian integers and doubles, so every
// field meets 0, -1, its largest value, enum values out of range and
// products that overflow. Any status is fine; a crash, a sanitizer report,
// a hang or an allocation past -rss_limit_mb is a finding.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/ipu/ipu_system.h"
#include "core/testing/fuzz.h"
#include "examples/tutorial_flags.h"
#include "examples/tutorial_reports.h"
#include "feeds/data_loader.h"
#include "feeds/dataset.h"
#include "feeds/outfeed_queue.h"
#include "optimizers/loss_scaling.h"
#include "pipelining/schedule.h"

namespace {

// The fuzzer's bytes as typed values; zeros once they run out.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T Get() {
    T v{};
    const size_t n = std::min(sizeof(T), size_);
    std::memcpy(&v, data_, n);
    data_ += n;
    size_ -= n;
    return v;
  }
  // A value biased to the edges: 0, -1, 1, the type's extremes, or raw.
  int64_t Int() {
    switch (Get<uint8_t>() % 8) {
      case 0:
        return 0;
      case 1:
        return -1;
      case 2:
        return 1;
      case 3:
        return std::numeric_limits<int32_t>::max();
      case 4:
        return std::numeric_limits<int64_t>::max();
      case 5:
        return std::numeric_limits<int64_t>::min();
      case 6:
        return Get<int16_t>();
      default:
        return Get<int64_t>();
    }
  }
  double Real() {
    switch (Get<uint8_t>() % 6) {
      case 0:
        return 0;
      case 1:
        return -1;
      case 2:
        return std::numeric_limits<double>::quiet_NaN();
      case 3:
        return std::numeric_limits<double>::infinity();
      case 4:
        return Get<float>();
      default:
        return Get<double>();
    }
  }
  std::string Rest() {
    std::string s(reinterpret_cast<const char*>(data_), size_);
    size_ = 0;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

template <typename T>
T Narrow(int64_t v) {
  return static_cast<T>(v);  // Wraps like a caller's cast would.
}

void Flags(Bytes& in) {
  std::vector<std::string> args;
  std::string arg;
  for (char c : in.Rest()) {
    if (c == '\n') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg.push_back(c);
    }
    if (args.size() > 64) return;
  }
  if (!arg.empty()) args.push_back(arg);
  absl::StatusOr<ipuflow::examples::TutorialFlags> f =
      ipuflow::examples::ParseTutorialFlagArgs(args);
  if (f.ok()) {
    // What the example derives from accepted flags must not overflow.
    (void)ipuflow::examples::TrainingSummary(*f);
  }
}

void Config(Bytes& in) {
  ipuflow::IPUConfig c;
  c.set_auto_select_ipus(Narrow<int32_t>(in.Int()));
  c.set_tiles_per_ipu(Narrow<int32_t>(in.Int()));
  c.set_memory_per_tile(in.Int());
  c.set_intra_op_threads_per_ipu(Narrow<int32_t>(in.Int()));
  c.set_replication_factor(Narrow<int32_t>(in.Int()));
  c.set_minimum_remote_tensor_size(in.Int());
  auto* fp = c.mutable_floating_point_behaviour();
  fp->set_esr(
      static_cast<
          ipuflow::FloatingPointBehaviourConfig::StochasticRoundingBehaviour>(
          in.Int()));
  const uint8_t bits = in.Get<uint8_t>();
  fp->set_inv(bits & 1);
  fp->set_set_all(bits & 2);
  (void)ipuflow::ResolveIPUConfig(c);
}

void Loader(Bytes& in) {
  ipuflow::feeds::DataLoaderOptions o;
  o.batch_size = in.Int();
  o.device_iterations = in.Int();
  o.replicas = in.Int();
  o.gradient_accumulation = in.Int();
  o.input_group_size = in.Int();
  o.input_group_type =
      static_cast<ipuflow::feeds::ReplicaGroupType>(Narrow<int32_t>(in.Int()));
  o.process_index = in.Int();
  o.process_count = in.Int();
  o.mode =
      static_cast<ipuflow::feeds::DataLoaderMode>(Narrow<int32_t>(in.Int()));
  o.buffer_size = in.Int();
  o.rebatched_worker_size = in.Int();
  o.num_workers = in.Int();
  o.drop_last = in.Get<uint8_t>() & 1;
  // Over 100 samples: an accepted setting has a small combined batch, so
  // what Create allocates and starts stays small.
  (void)ipuflow::feeds::DataLoader::Create(ipuflow::feeds::Range(0, 100), o);
}

void Schedule(Bytes& in) {
  const auto schedule = static_cast<ipuflow::pipelining::PipelineSchedule>(
      Narrow<int32_t>(in.Int()));
  const int stages = Narrow<int32_t>(in.Int());
  const int micro_batches = Narrow<int32_t>(in.Int());
  std::vector<int> mapping;
  const int n = in.Get<uint8_t>() % 8;
  for (int i = 0; i < n; ++i) mapping.push_back(Narrow<int32_t>(in.Int()));
  // A valid table is materialised: keep the accepted ones small (the
  // refused ones, the overflows among them, are the point).
  const int64_t items = int64_t{stages} * micro_batches;
  if (items > (int64_t{1} << 14) &&
      items <= ipuflow::pipelining::kMaxScheduleItems) {
    return;
  }
  (void)ipuflow::pipelining::MakeSchedule(schedule, stages, mapping,
                                          micro_batches, in.Get<uint8_t>() & 1);
}

void LossScaling(Bytes& in) {
  ipuflow::optimizers::LossScaling l;
  l.method = static_cast<ipuflow::optimizers::LossScalingMethod>(
      Narrow<int32_t>(in.Int()));
  l.loss_scaling = static_cast<float>(in.Real());
  l.automatic.bin_edge_location = static_cast<float>(in.Real());
  l.automatic.threshold_upper_count_proportion = static_cast<float>(in.Real());
  l.automatic.update_period = Narrow<int32_t>(in.Int());
  l.grad_scaler.init_scale = static_cast<float>(in.Real());
  l.grad_scaler.growth_factor = static_cast<float>(in.Real());
  l.grad_scaler.backoff_factor = static_cast<float>(in.Real());
  l.grad_scaler.growth_interval = Narrow<int32_t>(in.Int());
  (void)ipuflow::optimizers::CheckLossScaling(l);
}

void Outfeed(Bytes& in) {
  ipuflow::feeds::OutputMode mode;
  mode.kind =
      static_cast<ipuflow::feeds::OutputMode::Kind>(Narrow<int32_t>(in.Int()));
  mode.period = in.Int();
  const auto outfeed_mode =
      static_cast<ipuflow::feeds::OutfeedMode>(Narrow<int32_t>(in.Int()));
  const int depth = Narrow<int32_t>(in.Int());
  const int64_t bytes = in.Int();
  // Create allocates nothing per slot until a program starts the rings.
  (void)ipuflow::feeds::IPUOutfeedQueue::Create(mode, outfeed_mode, depth,
                                                bytes);
}

}  // namespace

IPUFLOW_FUZZ_TARGET(options) {
  if (size == 0) return;
  Bytes in(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      Flags(in);
      break;
    case 1:
      Config(in);
      break;
    case 2:
      Loader(in);
      break;
    case 3:
      Schedule(in);
      break;
    case 4:
      LossScaling(in);
      break;
    default:
      Outfeed(in);
      break;
  }
}
