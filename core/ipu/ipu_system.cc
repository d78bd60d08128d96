#include "core/ipu/ipu_system.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/option_checks.h"
#include "google/protobuf/io/tokenizer.h"
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
  return u == 0 ? absl::StrCat(bytes, " B")
                : absl::StrFormat("%.2f %s", v, units[u]);
}

absl::StatusOr<IPUConfig> ResolveIPUConfig(const IPUConfig& config) {
  IPUConfig c = config;
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  // Every field for its whole range (0: the default), the enum for a value
  // it names: a value from a newer or corrupted config is an error, never
  // run as something else.
  OptionChecker check("IPUConfig");
  check.Range("auto_select_ipus", c.auto_select_ipus(), 0, kMaxIpus,
              " (the largest IPU-POD)");
  check.Range("replication_factor", c.replication_factor(), 0, kMaxIpus,
              " (the largest IPU-POD)");
  check.Range("tiles_per_ipu", c.tiles_per_ipu(), 0, kMaxTilesPerIpu);
  check.Range("intra_op_threads_per_ipu", c.intra_op_threads_per_ipu(), 0,
              kMaxIntraOpThreadsPerIpu);
  check.Range("memory_per_tile", c.memory_per_tile(), 0, kInt64Max);
  check.Range("minimum_remote_tensor_size", c.minimum_remote_tensor_size(), 0,
              kInt64Max);
  check.Enum("floating_point_behaviour.esr", "StochasticRoundingBehaviour",
             c.floating_point_behaviour().esr(),
             {{FloatingPointBehaviourConfig::OFF, "OFF"},
              {FloatingPointBehaviourConfig::ON, "ON"},
              {FloatingPointBehaviourConfig::REPLICA_IDENTICAL_ONLY,
               "REPLICA_IDENTICAL_ONLY"}});
  RETURN_IF_ERROR(check.status());
  if (c.floating_point_behaviour().set_all()) {
    FloatingPointBehaviourConfig* fp = c.mutable_floating_point_behaviour();
    fp->set_inv(true);
    fp->set_div0(true);
    fp->set_oflo(true);
    fp->set_nanoo(true);
    fp->set_esr(FloatingPointBehaviourConfig::ON);
  }
  if (c.auto_select_ipus() == 0) c.set_auto_select_ipus(1);
  if (c.minimum_remote_tensor_size() == 0)
    c.set_minimum_remote_tensor_size(128);
  if (c.tiles_per_ipu() == 0) c.set_tiles_per_ipu(kDefaultTilesPerIpu);
  if (c.memory_per_tile() == 0) c.set_memory_per_tile(kDefaultMemoryPerTile);
  if (c.intra_op_threads_per_ipu() == 0) {
    const int cores =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    c.set_intra_op_threads_per_ipu(
        std::max(0, cores / c.auto_select_ipus() - 1));
  }
  // Every IPU's memory must be addressable and fit in the host's: programs
  // within the budget allocate it.
  OptionChecker products("IPUConfig");
  products.Product({{"tiles_per_ipu", c.tiles_per_ipu()},
                    {"memory_per_tile", c.memory_per_tile()}},
                   PhysicalMemoryBytes(),
                   " bytes per IPU (this machine's memory)");
  products.Product({{"auto_select_ipus", c.auto_select_ipus()},
                    {"(1 + intra_op_threads_per_ipu)",
                     1 + int64_t{c.intra_op_threads_per_ipu()}}},
                   kMaxSystemThreads, " threads");
  RETURN_IF_ERROR(products.status());
  return c;
}

namespace {

FloatingPointBehaviour FloatingPointFromConfig(const IPUConfig& c) {
  const FloatingPointBehaviourConfig& p = c.floating_point_behaviour();
  FloatingPointBehaviour fp;
  fp.inv = p.inv();
  fp.div0 = p.div0();
  fp.oflo = p.oflo();
  fp.nanoo = p.nanoo();
  switch (p.esr()) {
    case FloatingPointBehaviourConfig::ON:
      fp.esr = StochasticRounding::kOn;
      break;
    case FloatingPointBehaviourConfig::REPLICA_IDENTICAL_ONLY:
      fp.esr = StochasticRounding::kReplicaIdenticalOnly;
      break;
    default:  // OFF (other values are refused by ResolveIPUConfig).
      fp.esr = StochasticRounding::kOff;
  }
  fp.seed = c.seed();
  return fp;
}

}  // namespace

absl::StatusOr<IPUConfig> LoadIPUConfig(const std::string& path) {
  constexpr int64_t kMaxConfigBytes = 1 << 20;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot open IPU config '", path,
                                            "': ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("IPU config '", path, "' is not a regular file",
                     S_ISDIR(st.st_mode) ? " (it is a directory)" : ""));
  }
  if (st.st_size > kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("IPU config '", path, "' has ", st.st_size,
                     " bytes; the limit is ", kMaxConfigBytes));
  }
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(
        absl::StrCat("cannot open IPU config '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(
        absl::StrCat("cannot read IPU config '", path, "'"));
  }
  return ParseIPUConfigText(text.str(),
                            absl::StrCat("IPU config '", path, "'"));
}

namespace {

// The parser's first error, with its line and column (1-based).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!found_) {
      found_ = true;
      text_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                           message);
    }
  }
  const std::string& text() const { return text_; }

 private:
  bool found_ = false;
  std::string text_ = "unknown error";
};

}  // namespace

absl::StatusOr<IPUConfig> ParseIPUConfigText(const std::string& text,
                                             const std::string& what) {
  IPUConfig config;
  FirstError error;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&error);
  if (!parser.ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not a valid IPUConfig in text format: ", error.text()));
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
  TearDown(absl::CancelledError("IPU system destroyed"));
}

void IPUSystem::TearDown(absl::Status reason) {
  {
    MutexLock l(&mu_);
    closed_ = reason;
  }
  if (cancellation_) cancellation_->StartCancel(reason);
  {
    MutexLock l(&mu_);
    runs_cv_.Await(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return runs_ == 0;
    });
  }
  devices_.clear();  // Joins each worker after its queued tasks.
}

absl::Status IPUSystem::Configure(const IPUConfig& config) {
  ASSIGN_OR_RETURN(IPUConfig resolved, ResolveIPUConfig(config));
  TearDown(absl::CancelledError("IPU system reconfigured"));
  config_ = resolved;
  if (!config_.has_seed()) {
    // As on hardware: a random seed unless one is set (reset_ipu_seed).
    std::random_device device;
    config_.set_seed((static_cast<uint64_t>(device()) << 32) | device());
  }
  floating_point_ = FloatingPointFromConfig(config_);
  ++generation_;
  cancellation_ = std::make_shared<CancellationManager>();
  const int64_t budget =
      static_cast<int64_t>(config_.tiles_per_ipu()) * config_.memory_per_tile();
  std::vector<std::unique_ptr<IPUDevice>> devices;
  for (int i = 0; i < config_.auto_select_ipus(); ++i) {
    absl::StatusOr<std::unique_ptr<IPUDevice>> d =
        IPUDevice::Create(i, budget, config_.intra_op_threads_per_ipu());
    if (!d.ok()) {
      devices.clear();  // Joins the IPUs already started.
      const absl::Status s(
          d.status().code(),
          absl::StrCat("IPU system of ", config_.auto_select_ipus(),
                       " IPUs: ", d.status().message()));
      MutexLock l(&mu_);
      status_ = s;
      closed_ = absl::FailedPreconditionError(absl::StrCat(
          "the IPU system has no IPUs: the last Configure failed: ",
          s.message()));
      return s;
    }
    devices.push_back(*std::move(d));
  }
  devices_ = std::move(devices);
  {
    MutexLock l(&mu_);
    status_ = absl::OkStatus();
    closed_ = absl::OkStatus();
  }
  return link_ != nullptr ? AgreeOnSeed() : absl::OkStatus();
}

absl::Status IPUSystem::SetProcessLink(std::shared_ptr<ProcessLink> link) {
  if (link == nullptr) {
    return absl::InvalidArgumentError("SetProcessLink: null link");
  }
  const int64_t global = static_cast<int64_t>(config_.replication_factor()) *
                         link->process_count();
  if (global > kMaxIpus) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetProcessLink: replication_factor ", config_.replication_factor(),
        " x ", link->process_count(), " processes = ", global,
        " global replicas, more than ", kMaxIpus));
  }
  // Every process owns the same number of replicas (global replica g is
  // local g % R of process g / R).
  const std::string mine = absl::StrCat(config_.replication_factor());
  ASSIGN_OR_RETURN(const std::vector<std::string> all,
                   link->AllGatherStrings(/*tag=*/0x4E9C, mine));
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p] == mine) continue;
    std::string each;
    for (size_t q = 0; q < all.size(); ++q) {
      absl::StrAppend(&each, q == 0 ? "" : ", ", "process ", q, ": ", all[q]);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("SetProcessLink: every process must set the same "
                     "replication_factor (its local replicas); ",
                     each));
  }
  link_ = std::move(link);
  return AgreeOnSeed();
}

absl::Status IPUSystem::AgreeOnSeed() {
  uint64_t seed = config_.seed();
  RETURN_IF_ERROR(link_->Broadcast(
      /*tag=*/0x5eed0000 + generation_.load(), /*root=*/0, &seed, sizeof(seed),
      [] { return absl::OkStatus(); }));
  return ResetSeed(seed);
}

absl::Status IPUSystem::status() const {
  MutexLock l(&mu_);
  return status_;
}

absl::Status IPUSystem::ResetSeed(uint64_t seed) {
  MutexLock l(&mu_);
  if (runs_ > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("ResetSeed: ", runs_,
                     " run(s) in progress; reset the seed between "
                     "runs"));
  }
  // Runs start under mu_ (StartRun), so they see the new seed.
  config_.set_seed(seed);
  floating_point_.seed = seed;
  ++floating_point_.seed_epoch;
  return absl::OkStatus();
}

int IPUSystem::runs_in_progress() const {
  MutexLock l(&mu_);
  return runs_;
}

absl::StatusOr<IPUSystem::RunLease> IPUSystem::StartRun(
    uint64_t generation, const std::string& what) {
  MutexLock l(&mu_);
  if (!closed_.ok()) {
    return absl::Status(closed_.code(),
                        absl::StrCat(what, ": ", closed_.message()));
  }
  if (generation != generation_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what,
                     " was compiled before the IPU system was reconfigured; "
                     "compile it again"));
  }
  ++runs_;
  return RunLease(this);
}

IPUSystem::RunLease& IPUSystem::RunLease::operator=(RunLease&& o) noexcept {
  if (this != &o) {
    RunLease old(std::move(*this));
    system_ = o.system_;
    o.system_ = nullptr;
  }
  return *this;
}

IPUSystem::RunLease::~RunLease() {
  if (system_ == nullptr) return;
  MutexLock l(&system_->mu_);
  if (--system_->runs_ == 0) system_->runs_cv_.SignalAll();
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
