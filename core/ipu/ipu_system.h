// IPUSystem: the emulated IPUs, built from an IPUConfig. Owns the devices;
// Configure() tears them down (cancelling anything blocked on them) and
// builds new ones, so reconfiguring resets variables and compiled programs.
//
//   IPUConfig config;
//   config.set_auto_select_ipus(4);
//   ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, IPUSystem::Create(config));
//   system->device(2).memory_budget_bytes();   // 1472 tiles x 624 KiB
//
// Thread safety: accessors may be used from any thread while the system is
// configured. Configure() must not race with programs being started.
#ifndef IPUFLOW_CORE_IPU_IPU_SYSTEM_H_
#define IPUFLOW_CORE_IPU_IPU_SYSTEM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/ipu/ipu_config.pb.h"
#include "core/ipu/ipu_device.h"

namespace ipuflow {

inline constexpr int kDefaultTilesPerIpu = 1472;
inline constexpr int64_t kDefaultMemoryPerTile = 624 * 1024;

// The config with every zero field replaced by its default; InvalidArgument
// for negative values.
absl::StatusOr<IPUConfig> ResolveIPUConfig(const IPUConfig& config);
// Reads an IPUConfig in protobuf text format; errors name the file.
absl::StatusOr<IPUConfig> LoadIPUConfig(const std::string& path);

class IPUSystem {
 public:
  static absl::StatusOr<std::unique_ptr<IPUSystem>> Create(
      const IPUConfig& config);
  ~IPUSystem();

  // Resets the system: cancels blocked work with Cancelled, destroys the
  // IPUs (their variables and programs) and creates new ones.
  absl::Status Configure(const IPUConfig& config);

  int num_ipus() const { return static_cast<int>(devices_.size()); }
  IPUDevice& device(int i) { return *devices_[i]; }
  const IPUConfig& config() const { return config_; }
  // Changes on every Configure; compile caches key on it.
  uint64_t generation() const { return generation_; }
  CancellationManager* cancellation() { return cancellation_.get(); }

  // "IPU 0: host->device 1.2 MB, device->host 40 KB, IPU->IPU 0 B" lines.
  std::string TransferReport() const;
  void ResetCounters();

 private:
  IPUSystem() = default;

  IPUConfig config_;
  uint64_t generation_ = 0;
  std::unique_ptr<CancellationManager> cancellation_;
  std::vector<std::unique_ptr<IPUDevice>> devices_;
};

// "1.50 MiB"
std::string HumanBytes(int64_t bytes);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_IPU_SYSTEM_H_
