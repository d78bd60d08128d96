#include "examples/tutorial_processes.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_link.h"
#include "core/distributed/process_identity.h"
#include "core/status.h"
#include "feeds/data_loader_options.h"

namespace ipuflow::examples {

absl::StatusOr<TutorialProcesses> TutorialProcesses::Join() {
  ASSIGN_OR_RETURN(const distributed::ProcessIdentity id,
                   distributed::ProcessIdentityFromEnvironment());
  TutorialProcesses p;
  if (!id.multi_process()) return p;
  ASSIGN_OR_RETURN(std::shared_ptr<distributed::MpiLink> link,
                   distributed::MpiLink::World());
  p.index_ = link->process_index();
  p.count_ = link->process_count();
  p.link_ = std::move(link);
  if (p.index_ != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) {
    return absl::InternalError("cannot close stdout of process > 0");
  }
  return p;
}

absl::Status TutorialProcesses::Link(IPUSystem& system) const {
  return link_ != nullptr ? system.SetProcessLink(link_) : absl::OkStatus();
}

absl::Status TutorialProcesses::Agree(
    std::initializer_list<const feeds::DataLoader*> loaders) const {
  if (link_ == nullptr) return absl::OkStatus();
  for (const feeds::DataLoader* loader : loaders) {
    RETURN_IF_ERROR(
        feeds::AgreeAcrossProcesses(loader->plan_key(), index_, *link_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<double, int64_t>> TutorialProcesses::Sum(double a,
                                                                  int64_t b) {
  if (link_ == nullptr) return std::make_pair(a, b);
  // Exact text: "%a" round-trips a double.
  char mine[64];
  std::snprintf(mine, sizeof(mine), "%a %lld", a, static_cast<long long>(b));
  ASSIGN_OR_RETURN(const std::vector<std::string> all,
                   link_->AllGatherStrings(next_tag_++, mine));
  double sum_a = 0;
  int64_t sum_b = 0;
  for (const std::string& s : all) {
    double x = 0;
    long long y = 0;
    if (std::sscanf(s.c_str(), "%la %lld", &x, &y) != 2) {
      return absl::DataLossError(absl::StrCat("a process sent '", s, "'"));
    }
    sum_a += x;
    sum_b += y;
  }
  return std::make_pair(sum_a, sum_b);
}

ProgressCallback TutorialProcesses::ProgressBar(int64_t first_step,
                                                int64_t steps,
                                                int replicas) const {
  const int64_t all_replicas = int64_t{replicas} * count_;
  return
      [=, index = index_](int64_t done, int64_t, float loss, float accuracy) {
        if (index != 0) return;  // One progress bar for the run.
        DrawProgress((first_step + done / replicas) * all_replicas,
                     steps * all_replicas, loss, accuracy);
      };
}

int TutorialMain(int argc, char** argv,
                 absl::Status (*run)(const TutorialFlags&,
                                     TutorialProcesses&)) {
  absl::StatusOr<TutorialProcesses> procs = TutorialProcesses::Join();
  absl::StatusOr<TutorialFlags> flags =
      procs.ok() ? ParseTutorialFlags(argc, argv, procs->count())
                 : procs.status();
  const absl::Status status = flags.ok() ? run(*flags, *procs) : flags.status();
  if (status.ok()) return 0;
  std::fflush(stdout);
  std::fprintf(stderr, "\n%s\n", status.ToString().c_str());
  return 1;
}

}  // namespace ipuflow::examples
