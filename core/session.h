// Session: runs a graph on the host. It compiles one Program per distinct
// (feeds, feed shapes, fetches, targets) and keeps it, so repeated Run calls
// with the same signature never re-plan; it owns the variables.
//
//   Session session(scope.graph());
//   RETURN_IF_ERROR(session.Initialize());          // variable initialisers
//   std::vector<Tensor> out;
//   RETURN_IF_ERROR(session.Run({{x, batch}}, {loss}, {train}, &out));
//
// Errors name the feed or node at fault: a Placeholder nobody fed, a fed
// value of the wrong dtype or shape. Run returns ResourceExhausted if the
// session's thread pools could not start their workers.
//
// Thread safety: Run may be called from several threads; runs of the same
// compiled program are serialised, different programs run concurrently.
#ifndef IPUFLOW_CORE_SESSION_H_
#define IPUFLOW_CORE_SESSION_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/mutex.h"
#include "core/program.h"
#include "core/resource.h"
#include "core/thread_pool.h"

namespace ipuflow {

struct SessionOptions {
  int intra_op_threads = 0;  // Workers besides the caller; 0: cores - 1.
  int inter_op_threads = 1;  // 0: run nodes one at a time, in order.
  bool fuse = true;          // ProgramSpec::fuse of every program it compiles.
};

class Session {
 public:
  // `graph` is not owned and must outlive the session.
  explicit Session(const Graph* graph, SessionOptions options = {});
  ~Session();

  absl::Status Run(const FeedList& feeds, const std::vector<Output>& fetches,
                   const std::vector<Node*>& targets,
                   std::vector<Tensor>* outputs);
  absl::Status Run(const FeedList& feeds, const std::vector<Output>& fetches,
                   std::vector<Tensor>* outputs) {
    return Run(feeds, fetches, {}, outputs);
  }
  // Runs every node in the graph's "initializers" collection.
  absl::Status Initialize();

  // The compiled program for this signature (compiling it if needed).
  absl::StatusOr<Program*> GetProgram(const FeedList& feeds,
                                      const std::vector<Output>& fetches,
                                      const std::vector<Node*>& targets);
  int num_compiles() const;
  ResourceMgr* resources() { return &resources_; }
  RunEnv* env() { return &env_; }

 private:
  struct Entry {
    Mutex mu;
    std::unique_ptr<Program> program;
  };

  // Entries are never removed, so a returned Entry stays valid.
  absl::StatusOr<Entry*> GetEntry(const FeedList& feeds,
                                  const std::vector<Output>& fetches,
                                  const std::vector<Node*>& targets);

  const Graph* graph_;
  const bool fuse_;
  ThreadPool intra_op_;
  std::unique_ptr<ThreadPool> inter_op_;
  ResourceMgr resources_;
  RunEnv env_;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> programs_ ABSL_GUARDED_BY(mu_);
  int num_compiles_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_SESSION_H_
