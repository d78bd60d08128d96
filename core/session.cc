#include "core/session.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace ipuflow {

namespace {
// Workers besides the calling thread, which takes part in ParallelFor.
int DefaultThreads(int n) {
  return n > 0 ? n
               : static_cast<int>(
                     std::max(2u, std::thread::hardware_concurrency())) -
                     1;
}
}  // namespace

Session::Session(const Graph* graph, SessionOptions options)
    : graph_(graph),
      fuse_(options.fuse),
      intra_op_("session-intra-op", DefaultThreads(options.intra_op_threads)) {
  if (options.inter_op_threads > 0) {
    inter_op_ = std::make_unique<ThreadPool>("session-inter-op",
                                             options.inter_op_threads);
  }
  env_.intra_op = &intra_op_;
  env_.inter_op = inter_op_.get();
  env_.resources = &resources_;
}

Session::~Session() = default;

absl::StatusOr<Program*> Session::GetProgram(
    const FeedList& feeds, const std::vector<Output>& fetches,
    const std::vector<Node*>& targets) {
  ASSIGN_OR_RETURN(Entry * entry, GetEntry(feeds, fetches, targets));
  return entry->program.get();
}

absl::StatusOr<Session::Entry*> Session::GetEntry(
    const FeedList& feeds, const std::vector<Output>& fetches,
    const std::vector<Node*>& targets) {
  std::string key;
  ASSIGN_OR_RETURN(ProgramSpec spec,
                   MakeProgramSpec(feeds, fetches, targets, &key));
  spec.fuse = fuse_;
  Entry* entry;
  {
    MutexLock l(&mu_);
    auto& slot = programs_[key];
    if (!slot) slot = std::make_unique<Entry>();
    entry = slot.get();
  }
  MutexLock l(&entry->mu);
  if (!entry->program) {
    ASSIGN_OR_RETURN(entry->program, Program::Compile(*graph_, spec));
    MutexLock l2(&mu_);
    ++num_compiles_;
  }
  return entry;
}

absl::Status Session::Run(const FeedList& feeds,
                          const std::vector<Output>& fetches,
                          const std::vector<Node*>& targets,
                          std::vector<Tensor>* outputs) {
  // A pool that could not start its workers would run everything inline,
  // slowly and silently: say so instead.
  RETURN_IF_ERROR(intra_op_.status());
  if (inter_op_ != nullptr) RETURN_IF_ERROR(inter_op_->status());
  ASSIGN_OR_RETURN(Entry * entry, GetEntry(feeds, fetches, targets));
  std::vector<Tensor> values;
  values.reserve(feeds.size());
  for (const auto& [out, value] : feeds) values.push_back(value);
  MutexLock l(&entry->mu);
  return entry->program->Run(env_, values, outputs);
}

absl::Status Session::Initialize() {
  const auto& inits = graph_->collection("initializers");
  if (inits.empty()) return absl::OkStatus();
  return Run({}, {}, inits, nullptr);
}

int Session::num_compiles() const {
  MutexLock l(&mu_);
  return num_compiles_;
}

}  // namespace ipuflow
