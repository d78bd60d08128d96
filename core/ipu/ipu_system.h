// IPUSystem: the emulated IPUs, built from an IPUConfig. Owns the devices;
// Configure() tears them down (cancelling anything blocked on them) and
// builds new ones, so reconfiguring resets variables and compiled programs.
//
//   IPUConfig config;
//   config.set_auto_select_ipus(4);
//   ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system,
//                    IPUSystem::Create(config));
//   system->device(2).memory_budget_bytes();  // 1472 tiles x 624 KiB
//
// Thread safety: accessors may be used from any thread while the system is
// configured. Executables hold a RunLease while they run; Configure() and
// the destructor cancel the system's CancellationManager (every blocked
// wait of a run returns Cancelled: "IPU system destroyed" / "IPU system
// reconfigured"), then wait for every lease to end before destroying the
// IPUs, so no run outlives the devices it uses. Calling Configure() or
// destroying the system from inside a run (a kernel) deadlocks: don't.
// Ownership: the system must outlive the strategies and executables
// compiled for it; an executable compiled before a Configure() refuses to
// run (FailedPrecondition) instead of touching the destroyed IPUs.
#ifndef IPUFLOW_CORE_IPU_IPU_SYSTEM_H_
#define IPUFLOW_CORE_IPU_IPU_SYSTEM_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/floating_point.h"
#include "core/ipu/ipu_config.pb.h"
#include "core/ipu/ipu_device.h"
#include "core/ipu/process_link.h"
#include "core/mutex.h"

namespace ipuflow {

inline constexpr int kDefaultTilesPerIpu = 1472;
inline constexpr int64_t kDefaultMemoryPerTile = 624 * 1024;
// Bounds of an IPUConfig (what one host can emulate): at most 1024 IPUs
// (the largest IPU-POD) and replicas; at most 65536 tiles per IPU; at most
// 256 intra-op threads per IPU and 4096 threads in all; an IPU's memory
// (tiles x bytes per tile) at most the host's physical memory.
inline constexpr int kMaxIpus = 1024;
inline constexpr int kMaxTilesPerIpu = 1 << 16;
inline constexpr int kMaxIntraOpThreadsPerIpu = 256;
inline constexpr int kMaxSystemThreads = 4096;

// The config with every zero field replaced by its default (and
// floating_point_behaviour.set_all applied); InvalidArgument naming every
// field at fault, its value and the limit (core/option_checks.h) for
// negative values, sizes outside the bounds above, an esr that is not a
// StochasticRoundingBehaviour (3, 7, -1), and the products tiles_per_ipu x
// memory_per_tile (this machine's memory) and auto_select_ipus x (1 +
// intra_op_threads_per_ipu) (kMaxSystemThreads).
absl::StatusOr<IPUConfig> ResolveIPUConfig(const IPUConfig& config);
// Reads an IPUConfig in protobuf text format (a regular file of at most
// 1 MiB); errors name the file, and for text that does not parse, the line
// and column of the first error.
absl::StatusOr<IPUConfig> LoadIPUConfig(const std::string& path);
// Parses IPUConfig text: InvalidArgument "<what> is not a valid IPUConfig
// in text format: line L, column C: <the parser's message>". The values
// are checked by ResolveIPUConfig, not here.
absl::StatusOr<IPUConfig> ParseIPUConfigText(const std::string& text,
                                             const std::string& what);

class IPUSystem {
 public:
  // ResourceExhausted naming the IPU when its threads cannot be started.
  static absl::StatusOr<std::unique_ptr<IPUSystem>> Create(
      const IPUConfig& config);
  // Cancels what runs ("IPU system destroyed"), waits for the runs to end,
  // then destroys the IPUs.
  ~IPUSystem();

  // Resets the system: cancels blocked work with Cancelled ("IPU system
  // reconfigured"), waits for runs in progress to return, destroys the IPUs
  // (their variables and programs) and creates new ones. A bad config
  // leaves the system as it was; if the new IPUs cannot be started
  // (ResourceExhausted) the system has none until the next Configure.
  absl::Status Configure(const IPUConfig& config);

  int num_ipus() const { return static_cast<int>(devices_.size()); }
  IPUDevice& device(int i) { return *devices_[i]; }
  // The resolved config; its seed is set (drawn at random by Configure when
  // the given config had none).
  const IPUConfig& config() const { return config_; }
  // config().floating_point_behaviour and seed, as every program run on the
  // system sees it (RunEnv::floating_point). Valid until the next Configure.
  const FloatingPointBehaviour& floating_point() const {
    return floating_point_;
  }
  // TensorFlow's ipu.utils.reset_ipu_seed: sets the seed of stochastic
  // rounding without reconfiguring (variables and programs stay), and
  // restarts every program's run count, so the runs that follow round
  // exactly as the runs after a Configure with this seed.
  // FailedPrecondition while a run is in progress.
  absl::Status ResetSeed(uint64_t seed);
  // Changes on every Configure; compile caches key on it.
  uint64_t generation() const { return generation_.load(); }
  CancellationManager* cancellation() { return cancellation_.get(); }
  // The same, shared: an executable that registers on it for its whole
  // life keeps it (Configure replaces it, the destructor destroys the
  // system's reference) so that it can always unregister.
  std::shared_ptr<CancellationManager> shared_cancellation() const {
    return cancellation_;
  }
  // OK, or why the system has no IPUs (the last Configure failed).
  absl::Status status() const;

  // A run of an executable on the system; while one exists, Configure and
  // the destructor wait (after cancelling). Move-only.
  class RunLease {
   public:
    RunLease() = default;
    RunLease(RunLease&& o) noexcept : system_(o.system_) {
      o.system_ = nullptr;
    }
    RunLease& operator=(RunLease&& o) noexcept;
    ~RunLease();

   private:
    friend class IPUSystem;
    explicit RunLease(IPUSystem* s) : system_(s) {}
    IPUSystem* system_ = nullptr;
  };
  // A lease for a run of something compiled for `generation` (`what` names
  // it in errors): FailedPrecondition if the system was reconfigured since,
  // or has no IPUs; Cancelled while it is being reconfigured or destroyed.
  absl::StatusOr<RunLease> StartRun(uint64_t generation,
                                    const std::string& what);
  // Leases held now (for tests that need a run to be in progress).
  int runs_in_progress() const;

  // Makes this system one process's share of a multi-process run
  // (docs/DISTRIBUTED.md): programs compiled afterwards have
  // replication_factor local replicas of replication_factor x
  // link->process_count() global ones, and collectives across processes.
  // Every process calls it (a collective: process 0's seed becomes every
  // process's, so initialisers and stochastic rounding agree; Configure
  // agrees again), before compiling, and compiles the same programs in the
  // same order (each program's collectives are told apart on the wire by
  // its position in that order).
  absl::Status SetProcessLink(std::shared_ptr<ProcessLink> link);
  // Null in a single-process run.
  const std::shared_ptr<ProcessLink>& process_link() const { return link_; }
  // The tag of the next program compiled: 1, 2, ... in compile order.
  uint64_t NextProgramTag() { return ++program_tags_; }

  // "IPU 0: host->device 1.2 MB, device->host 40 KB, IPU->IPU 0 B" lines.
  std::string TransferReport() const;
  void ResetCounters();

 private:
  IPUSystem() = default;

  // Cancels runs with `reason`, waits for their leases, destroys the IPUs.
  void TearDown(absl::Status reason);
  // Every process takes process 0's seed.
  absl::Status AgreeOnSeed();

  IPUConfig config_;
  std::shared_ptr<ProcessLink> link_;
  std::atomic<uint64_t> program_tags_{0};
  FloatingPointBehaviour floating_point_;
  std::atomic<uint64_t> generation_{0};
  std::shared_ptr<CancellationManager> cancellation_;
  std::vector<std::unique_ptr<IPUDevice>> devices_;
  mutable Mutex mu_;
  CondVar runs_cv_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
  // Why runs cannot start now (tearing down), or OK.
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// "1.50 MiB"
std::string HumanBytes(int64_t bytes);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_IPU_SYSTEM_H_
