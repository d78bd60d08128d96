// IPUDevice: one emulated IPU. It owns a worker thread that runs the device
// programs given to it one at a time, in order; a memory budget (tiles x
// bytes per tile); the variables that live on it; an intra-op thread pool;
// and counters of the bytes it moved.
//
//   IPUDevice& ipu = system.device(0);
//   absl::Notification done;
//   ipu.Submit([&] {  // runs on the IPU's thread, after earlier tasks
//     status = program->Run(env, feeds, &out);
//     done.Notify();
//   });
//   done.WaitForNotification();
//
// Thread safety: Submit and the counters may be used from any thread. The
// destructor runs the tasks already submitted, then joins the worker (the
// owner, IPUSystem, cancels blocked work first, so those tasks end).
#ifndef IPUFLOW_CORE_IPU_IPU_DEVICE_H_
#define IPUFLOW_CORE_IPU_IPU_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/mutex.h"
#include "core/resource.h"
#include "core/thread_pool.h"

namespace ipuflow {

// Bytes moved by one IPU, by direction. Updated with relaxed atomics: the
// totals are exact once the programs that moved them have finished.
struct TransferCounters {
  std::atomic<int64_t> host_to_device{0};
  std::atomic<int64_t> device_to_host{0};
  std::atomic<int64_t> ipu_to_ipu{0};  // Sent to other IPUs.
  // Streamed to and from the IPU's remote memory (offloaded optimizer
  // state of device programs, core/ipu/remote_state.h).
  std::atomic<int64_t> remote_memory{0};
  // Not bytes: the variable elements this IPU's optimizer-update kernels
  // computed (ops/state/update_shard.h), for the 1/R of sharded updates.
  std::atomic<int64_t> updated_elements{0};
  void Reset() {
    host_to_device = 0;
    device_to_host = 0;
    ipu_to_ipu = 0;
    remote_memory = 0;
    updated_elements = 0;
  }
};

class IPUDevice {
 public:
  // Starts the IPU's worker thread and intra-op pool; ResourceExhausted
  // naming the IPU when the system refuses the threads (those started are
  // joined).
  static absl::StatusOr<std::unique_ptr<IPUDevice>> Create(
      int id, int64_t memory_budget_bytes, int intra_op_threads);
  ~IPUDevice();
  IPUDevice(const IPUDevice&) = delete;
  IPUDevice& operator=(const IPUDevice&) = delete;

  int id() const { return id_; }
  int64_t memory_budget_bytes() const { return memory_budget_; }
  // Runs `task` on this IPU's thread after the tasks submitted before it.
  void Submit(std::function<void()> task);
  ThreadPool* intra_op() { return &intra_op_; }
  ResourceMgr* resources() { return &resources_; }
  TransferCounters& counters() { return counters_; }
  std::string name() const { return "IPU " + std::to_string(id_); }
  // The device whose worker thread is calling, or nullptr on other threads.
  static IPUDevice* Current();

 private:
  IPUDevice(int id, int64_t memory_budget_bytes, int intra_op_threads);

  const int id_;
  const int64_t memory_budget_;
  ThreadPool intra_op_;
  ResourceMgr resources_;
  TransferCounters counters_;
  // The IPU's thread: one worker, tasks in submission order. Declared last
  // so it drains and stops before what its tasks use.
  ThreadPool worker_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_IPU_DEVICE_H_
