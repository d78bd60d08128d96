#include "core/ipu/device_program.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/fed_resource.h"
#include "core/ipu/remote_state.h"
#include "core/ipu/work_lists.h"
#include "core/mutex.h"
#include "core/op_registry.h"

namespace ipuflow {
namespace {

// Adds to `reached` the nodes `spec` may run: its fetches and targets and
// what they depend on (stopping at feeds), and, for nodes that run
// sub-programs (device loops), their bodies' nodes, recursively.
void ReachNodes(const ProgramSpec& spec, std::set<const Node*>* reached);

void ReachFrom(const Node* n, const std::set<const Node*>& fed,
               std::set<const Node*>* reached) {
  std::vector<const Node*> stack = {n};
  while (!stack.empty()) {
    const Node* m = stack.back();
    stack.pop_back();
    if (fed.count(m) > 0 || !reached->insert(m).second) continue;
    for (const Output& in : m->inputs()) stack.push_back(in.node);
    for (const Node* c : m->control_inputs()) stack.push_back(c);
    const SubProgramsFn& subs = m->op_def().sub_programs();
    if (!subs) continue;
    std::vector<TensorShape> shapes;
    for (const Output& in : m->inputs()) shapes.push_back(in.shape());
    absl::StatusOr<std::vector<SubProgramSpec>> specs =
        subs(*m, shapes, ProgramSpec());
    if (!specs.ok()) continue;  // Compiling the program reported it.
    for (const SubProgramSpec& sub : *specs) ReachNodes(sub.spec, reached);
  }
}

void ReachNodes(const ProgramSpec& spec, std::set<const Node*>* reached) {
  std::set<const Node*> fed;
  for (const Output& f : spec.feeds) fed.insert(f.node);
  for (const Output& f : spec.fetches) ReachFrom(f.node, fed, reached);
  for (const Node* t : spec.targets) ReachFrom(t, fed, reached);
}

// Prepares, on this (host) thread, the host resources (infeed and outfeed
// queues) the program uses, so their host threads start here rather than
// lazily on a device thread. Errors (a queue already serving another
// replica count) are left for the kernel to report when it runs.
void PrepareHostResources(const Graph& graph, const Program& program,
                          int replicas,
                          std::vector<std::weak_ptr<HostResource>>* used_out) {
  if (graph.host_resources().empty()) return;
  std::set<const Node*> reached;
  for (const Node* n : program.nodes_in_order()) {
    ReachFrom(n, {}, &reached);
  }
  // A program that writes variables trains (an outfeed's Default mode).
  const bool training =
      std::any_of(reached.begin(), reached.end(), [](const Node* n) {
        return n->op_def().resource_access() == ResourceAccess::kWrite;
      });
  for (const auto& [id, entry] : graph.host_resources()) {
    bool used = false;
    for (int user : entry.users) used |= reached.count(graph.node(user)) > 0;
    std::shared_ptr<HostResource> r = entry.resource.lock();
    if (used && r != nullptr) {
      r->Prepare(replicas, training).IgnoreError();
      used_out->push_back(r);
    }
  }
}

// The host resources of kind T (device frames: pipelines; remote state:
// offloaded optimizer state) whose nodes the program runs, found through
// the graph's host resources: core knows them by kind, not by op name.
template <typename T>
std::vector<std::shared_ptr<T>> UsedResources(const Graph& graph,
                                              const Program& program) {
  std::vector<std::shared_ptr<T>> found;
  if (graph.host_resources().empty()) return found;
  std::set<const Node*> reached;
  for (const Node* n : program.nodes_in_order()) ReachFrom(n, {}, &reached);
  for (const auto& [id, entry] : graph.host_resources()) {
    std::shared_ptr<HostResource> r = entry.resource.lock();
    auto typed = std::dynamic_pointer_cast<T>(r);
    if (typed == nullptr) continue;
    for (int user : entry.users) {
      if (reached.count(graph.node(user)) > 0) {
        found.push_back(typed);
        break;
      }
    }
  }
  return found;
}

}  // namespace

RunEnv IpuRunEnv(IPUSystem& system, int ipu, int replica, int replicas,
                 CollectiveGroup* group) {
  IPUDevice& device = system.device(ipu);
  RunEnv env;
  env.intra_op = device.intra_op();
  env.resources = device.resources();
  env.replica = replica;
  env.num_replicas = replicas;
  env.ipu = device.id();
  env.cancellation = system.cancellation();
  env.collectives = group;
  env.first_replica = group != nullptr ? group->global_replica(0) : 0;
  env.device = &device;
  env.memory_budget = device.memory_budget_bytes();
  env.floating_point = &system.floating_point();
  return env;
}

void PostToShards(std::vector<RunEnv>* shards, std::vector<double>* cpu,
                  RunEnv* env) {
  env->post_to_shard = [shards, cpu](int shard,
                                     std::function<void(RunEnv&)> work,
                                     std::function<void()> done) {
    RunEnv& target = (*shards)[shard];
    if (IPUDevice::Current() == target.device) {
      work(target);
      done();
      return;
    }
    target.device->Submit(
        [cpu, shard, &target, work = std::move(work), done = std::move(done)] {
          const double c0 = ThreadCpuSeconds();
          work(target);
          (*cpu)[shard] += ThreadCpuSeconds() - c0;
          done();
        });
  };
}

struct DeviceProgram::ProducerLink {
  // The system was destroyed, reconfigured or cancelled. During a run the
  // news waits for its end (RunEnded), so readers get the run's own stop
  // and the steps before it first.
  void SystemCancelled(const absl::Status& why) {
    {
      MutexLock l(&mu);
      if (running) {
        deferred = why;
        return;
      }
    }
    Gone(why);
  }
  void RunStarted() {
    MutexLock l(&mu);
    running = true;
  }
  // After the run told its resources how it ended.
  void RunEnded() {
    absl::Status why;
    {
      MutexLock l(&mu);
      running = false;
      why = deferred;
    }
    if (!why.ok()) Gone(why);
  }
  // The first call tells every resource `why`; later calls do nothing.
  void Gone(const absl::Status& why) {
    std::vector<std::shared_ptr<HostResource>> told;
    {
      MutexLock l(&mu);
      if (gone) return;
      gone = true;
      for (const auto& weak : resources) {
        if (std::shared_ptr<HostResource> r = weak.lock()) told.push_back(r);
      }
    }
    for (const auto& r : told) {
      if (auto* fed = dynamic_cast<FedResource*>(r.get())) {
        fed->RemoveProducer(why);
      }
    }
  }

  Mutex mu;
  bool gone ABSL_GUARDED_BY(mu) = false;
  bool running ABSL_GUARDED_BY(mu) = false;
  absl::Status deferred ABSL_GUARDED_BY(mu);
  std::vector<std::weak_ptr<HostResource>> resources;  // Fixed at Compile.
};

DeviceProgram::~DeviceProgram() {
  CloseRuns();
  // After the last run's RunStopped: readers get its steps and its reason
  // first, then that nothing feeds them any more.
  if (producer_link_ != nullptr) {
    producer_link_->Gone(absl::CancelledError("executable destroyed"));
    system_cancel_->Unregister(system_cancel_token_);
  }
  for (const auto& weak : frames_) {
    if (std::shared_ptr<DeviceFrame> f = weak.lock()) f->Release(group_.get());
  }
  for (const auto& r : remote_states_) r->Release(group_.get());
}

absl::StatusOr<std::unique_ptr<DeviceProgram>> DeviceProgram::Compile(
    IPUSystem* system, const Graph& graph, const ProgramSpec& user_spec) {
  std::unique_ptr<DeviceProgram> dp(new DeviceProgram());
  // The system's compile options reach every sub-program (a pipeline's).
  ProgramSpec spec = user_spec;
  spec.recompute = system->config().allow_recompute();
  dp->system_ = system;
  dp->generation_ = system->generation();
  ASSIGN_OR_RETURN(std::unique_ptr<Program> first,
                   Program::Compile(graph, spec));
  dp->num_shards_ = first->num_shards();
  // A device frame (a pipeline) keeps several IPUs of each replica busy:
  // the replica spans the frame's IPUs and the program's shards.
  const std::vector<std::shared_ptr<DeviceFrame>> frames =
      UsedResources<DeviceFrame>(graph, *first);
  dp->ipus_per_replica_ = dp->num_shards_;
  std::string what =
      absl::StrCat("the program (sharded over ", dp->num_shards_, " IPUs)");
  for (const auto& f : frames) {
    // The frame's parts are the program's sub-programs on their own IPUs
    // (its shards), so the frame names what spans them.
    if (f->ipus_per_replica() >= dp->ipus_per_replica_) {
      dp->ipus_per_replica_ = f->ipus_per_replica();
      what = f->name();
    }
  }
  ASSIGN_OR_RETURN(const int replicas,
                   ReplicationFactor(*system, dp->ipus_per_replica_, what));
  // Across processes, `replicas` is this process's share.
  dp->group_ =
      system->process_link() == nullptr
          ? std::make_unique<CollectiveGroup>(replicas)
          : std::make_unique<CollectiveGroup>(replicas, system->process_link(),
                                              system->NextProgramTag());
  // Memory: every replica has the same plan, so check replica 0's IPUs:
  // the plan of what runs (a frame's parts, stash and FIFOs are its node's
  // sub-programs), in one report.
  std::vector<IpuMemory> ipus(dp->ipus_per_replica_);
  for (int s = 0; s < dp->num_shards_; ++s) {
    ipus[s] = IpuMemory::FromPlan(first->shard_memory()[s]);
  }
  // Optimizer state offloaded by the program's weight updates (device
  // loops' gradient-accumulation wrappers, pipelines): remote, not on the
  // IPU.
  for (const auto& r : UsedResources<RemoteState>(graph, *first)) {
    RETURN_IF_ERROR(r->Plan(system, replicas, dp->group_.get(), &ipus));
    dp->remote_states_.push_back(r);
  }
  for (const auto& f : frames) {
    // Lowered now, on the host: placement errors are reported here, not by
    // the first run.
    RETURN_IF_ERROR(f->Lower(system, replicas, dp->group_.get(), &ipus));
    dp->frames_.push_back(f);
  }
  RETURN_IF_ERROR(CheckIpuMemory(*system, frames.empty() ? "the program" : what,
                                 ipus, &dp->memory_report_));
  dp->ipu_memory_ = ipus;
  dp->replicas_.push_back(std::move(first));
  for (int r = 1; r < replicas; ++r) {
    ASSIGN_OR_RETURN(std::unique_ptr<Program> p, Program::Compile(graph, spec));
    dp->replicas_.push_back(std::move(p));
  }
  PrepareHostResources(graph, *dp->replicas_[0], replicas,
                       &dp->host_resources_);
  if (!dp->host_resources_.empty()) {
    dp->producer_link_ = std::make_shared<ProducerLink>();
    dp->producer_link_->resources = dp->host_resources_;
    for (const auto& weak : dp->host_resources_) {
      std::shared_ptr<HostResource> r = weak.lock();
      if (auto* fed = dynamic_cast<FedResource*>(r.get())) fed->AddProducer();
    }
    // Already cancelled (a cancelled system): runs at once, so a reader
    // does not wait for a program that cannot run.
    dp->system_cancel_ = system->shared_cancellation();
    dp->system_cancel_token_ = dp->system_cancel_->Register(
        [link = dp->producer_link_, cancel = dp->system_cancel_.get()] {
          link->SystemCancelled(cancel->reason());
        });
  }
  dp->envs_.assign(replicas, std::vector<RunEnv>(dp->num_shards_));
  DeviceProgram* self = dp.get();
  for (int r = 0; r < replicas; ++r) {
    for (int s = 0; s < dp->num_shards_; ++s) {
      RunEnv& env = dp->envs_[r][s];
      env = IpuRunEnv(*system, dp->ipu_of_replica(r) + s, r, replicas,
                      dp->group_.get());
      if (dp->num_shards_ > 1) {
        env.on_shard = [self, r](int shard,
                                 const std::function<void(RunEnv&)>& work) {
          self->RunOnShard(r, shard, work);
        };
      }
    }
  }
  return dp;
}

std::optional<Tensor> DeviceProgram::OffloadedValue(
    int replica, const std::string& name) const {
  for (const auto& r : remote_states_) {
    if (std::optional<Tensor> v =
            r->OffloadedValue(group_.get(), replica, name)) {
      return v;
    }
  }
  return std::nullopt;
}

void DeviceProgram::RunOnShard(int replica, int shard,
                               const std::function<void(RunEnv&)>& work) {
  RunEnv& env = envs_[replica][shard];
  if (IPUDevice::Current() == env.device) {
    work(env);  // Already on that IPU's thread.
    return;
  }
  Notification done;
  env.device->Submit([&] {
    work(env);
    done.Notify();
  });
  done.WaitForNotification();
}

absl::Status DeviceProgram::Execute(
    const std::vector<std::vector<Tensor>>& args,
    std::vector<std::vector<Tensor>>* fetches) {
  const int replicas = num_replicas();
  if (args.size() != 1 && static_cast<int>(args.size()) != replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Execute: ", args.size(), " argument lists for ", replicas,
        " replicas; pass one list (every replica) or one per replica"));
  }
  // One cancellation per run: the system's (reset, teardown), Cancel(), the
  // destructor and a failing replica all wake every wait of the run.
  absl::StatusOr<std::shared_ptr<CancellationManager>> cancel =
      BeginRun("Execute: the program");
  if (!cancel.ok()) return cancel.status();
  if (producer_link_ != nullptr) producer_link_->RunStarted();
  absl::Status result;
  {
    absl::StatusOr<IPUSystem::RunLease> lease =
        system_->StartRun(generation_, "Execute of the program");
    result =
        lease.ok() ? ExecuteReplicas(args, fetches, *cancel) : lease.status();
  }
  // Output modes that hold values until the run's end send them now.
  for (const auto& weak : host_resources_) {
    if (!result.ok()) break;
    if (std::shared_ptr<HostResource> r = weak.lock())
      result = r->RunFinished();
  }
  // The run ended, not the queues: their readers learn why (issue 9).
  if (!result.ok()) {
    for (const auto& weak : host_resources_) {
      if (std::shared_ptr<HostResource> r = weak.lock()) r->RunStopped(result);
    }
  }
  if (producer_link_ != nullptr) producer_link_->RunEnded();
  EndRun();
  return result;
}

absl::Status DeviceProgram::ExecuteReplicas(
    const std::vector<std::vector<Tensor>>& args,
    std::vector<std::vector<Tensor>>* fetches,
    const std::shared_ptr<CancellationManager>& cancel) {
  const int replicas = num_replicas();
  group_->Reset();
  CollectiveGroup* group = group_.get();
  CancellationManager* run = cancel.get();
  const int group_token =
      run->Register([group, run] { group->Cancel(run->reason()); });
  const int system_token =
      system_->cancellation()->Register([run, system = system_] {
        run->StartCancel(system->cancellation()->reason());
      });
  for (auto& shards : envs_) {
    for (RunEnv& env : shards) env.cancellation = run;
  }
  fetches->assign(replicas, {});
  std::vector<absl::Status> status(replicas);
  Mutex mu;
  CondVar done_cv;
  int done = 0;
  for (int r = 0; r < replicas; ++r) {
    IPUDevice& device = system_->device(ipu_of_replica(r));
    const std::vector<Tensor>* feeds = args.size() == 1 ? &args[0] : &args[r];
    device.Submit([&, r, feeds] {
      int64_t feed_bytes = 0;
      for (const Tensor& t : *feeds) feed_bytes += t.TotalBytes();
      absl::Status s = run->cancelled() ? run->reason()
                                        : replicas_[r]->Run(envs_[r][0], *feeds,
                                                            &(*fetches)[r]);
      if (!s.ok() && !absl::IsCancelled(s)) {
        // The others stop at their next wait, saying why.
        run->StartCancel(absl::CancelledError(absl::StrCat(
            "run cancelled: replica ", r, " failed: ", s.message())));
        s = absl::Status(
            s.code(), absl::StrCat("replica ", r, " (IPU ", ipu_of_replica(r),
                                   "): ", s.message()));
      }
      TransferCounters& c = envs_[r][0].device->counters();
      c.host_to_device.fetch_add(feed_bytes, std::memory_order_relaxed);
      int64_t out_bytes = 0;
      for (const Tensor& t : (*fetches)[r]) out_bytes += t.TotalBytes();
      c.device_to_host.fetch_add(out_bytes, std::memory_order_relaxed);
      c.ipu_to_ipu.fetch_add(
          replicas_[r]->cross_shard_bytes() + group_->bytes_sent(r),
          std::memory_order_relaxed);
      MutexLock l(&mu);
      status[r] = std::move(s);
      ++done;
      done_cv.SignalAll();
    });
  }
  {
    MutexLock l(&mu);
    done_cv.Await(
        &mu, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done == replicas; });
  }
  system_->cancellation()->Unregister(system_token);
  run->Unregister(group_token);
  // Prefer the root cause over the Cancelled it caused in other replicas.
  for (const absl::Status& s : status) {
    if (!s.ok() && !absl::IsCancelled(s)) return s;
  }
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

std::string DeviceProgram::MemoryReport() const { return memory_report_; }

}  // namespace ipuflow
