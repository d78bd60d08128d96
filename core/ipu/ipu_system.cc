#include "core/ipu/ipu_system.h"

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"

namespace ipuflow {

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.2f %s", v, units[u]);
}

absl::StatusOr<IPUConfig> ResolveIPUConfig(const IPUConfig& config) {
  IPUConfig c = config;
  if (c.auto_select_ipus() < 0 || c.tiles_per_ipu() < 0 ||
      c.memory_per_tile() < 0 || c.intra_op_threads_per_ipu() < 0 ||
      c.replication_factor() < 0 || c.minimum_remote_tensor_size() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUConfig: negative value in {", c.ShortDebugString(), "}"));
  }
  if (c.auto_select_ipus() == 0) c.set_auto_select_ipus(1);
  if (c.minimum_remote_tensor_size() == 0) c.set_minimum_remote_tensor_size(128);
  if (c.tiles_per_ipu() == 0) c.set_tiles_per_ipu(kDefaultTilesPerIpu);
  if (c.memory_per_tile() == 0) c.set_memory_per_tile(kDefaultMemoryPerTile);
  if (c.intra_op_threads_per_ipu() == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    c.set_intra_op_threads_per_ipu(std::max(0, cores / c.auto_select_ipus() - 1));
  }
  return c;
}

absl::StatusOr<IPUConfig> LoadIPUConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open IPU config '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  IPUConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPU config '", path, "' is not a valid IPUConfig in text format"));
  }
  return config;
}

absl::StatusOr<std::unique_ptr<IPUSystem>> IPUSystem::Create(
    const IPUConfig& config) {
  std::unique_ptr<IPUSystem> system(new IPUSystem());
  RETURN_IF_ERROR(system->Configure(config));
  return system;
}

IPUSystem::~IPUSystem() {
  if (cancellation_) {
    cancellation_->StartCancel(absl::CancelledError("the IPU system was destroyed"));
  }
  devices_.clear();
}

absl::Status IPUSystem::Configure(const IPUConfig& config) {
  ASSIGN_OR_RETURN(IPUConfig resolved, ResolveIPUConfig(config));
  if (cancellation_) {
    cancellation_->StartCancel(absl::CancelledError("the IPU system was reconfigured"));
  }
  devices_.clear();  // Joins each worker after its queued tasks.
  config_ = resolved;
  ++generation_;
  cancellation_ = std::make_unique<CancellationManager>();
  const int64_t budget = static_cast<int64_t>(config_.tiles_per_ipu()) *
                         config_.memory_per_tile();
  for (int i = 0; i < config_.auto_select_ipus(); ++i) {
    devices_.push_back(std::make_unique<IPUDevice>(
        i, budget, config_.intra_op_threads_per_ipu()));
  }
  return absl::OkStatus();
}

std::string IPUSystem::TransferReport() const {
  std::string out;
  for (const auto& d : devices_) {
    TransferCounters& c = d->counters();
    absl::StrAppend(&out, d->name(), ": host->device ",
                    HumanBytes(c.host_to_device.load()), ", device->host ",
                    HumanBytes(c.device_to_host.load()), ", IPU->IPU ",
                    HumanBytes(c.ipu_to_ipu.load()), "\n");
  }
  return out;
}

void IPUSystem::ResetCounters() {
  for (auto& d : devices_) d->counters().Reset();
}

}  // namespace ipuflow
