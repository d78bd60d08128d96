// Flight: the MPI requests of one MpiLink call, and the one wait loop that
// advances them while it polls the caller's cancellation, another process's
// failure notice and the stall timer (mpi_link.h says what each means).
// Internal to core/distributed.
#ifndef IPUFLOW_CORE_DISTRIBUTED_MPI_FLIGHT_H_
#define IPUFLOW_CORE_DISTRIBUTED_MPI_FLIGHT_H_

#include <mpi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status.h"

namespace ipuflow::distributed::internal {

// The failure notice's tag; data tags never use it (mpi_link.cc).
inline constexpr int kFailTag = 1;

using Buffer = std::shared_ptr<std::vector<char>>;
// `bytes` bytes of unspecified contents, often those of a buffer an earlier
// call gave back (when its last reference went).
Buffer NewBuffer(int64_t bytes);
// OK for MPI_SUCCESS, else Internal naming `what` and MPI's text.
absl::Status MpiError(int rc, const std::string& what);
// Keeps `b` until the process ends: after a failed wait MPI may still read
// or write it (a late message must not land in freed memory).
void KeepForever(const Buffer& b);

// The requests of one call, and what each waits for (for errors).
class Flight {
 public:
  // `cancelled` and `broken` are polled while waiting: the caller's
  // cancellation, and a failure another wait of this process saw.
  Flight(MPI_Comm comm, std::string name,
         const std::function<absl::Status()>* cancelled,
         std::function<absl::Status()> broken, absl::Duration stall_timeout)
      : comm_(comm),
        name_(std::move(name)),
        cancelled_(cancelled),
        broken_(std::move(broken)),
        stall_timeout_(stall_timeout) {}

  // Starts sending / receiving [data, data + bytes) of `buf`; returns the
  // request's index.
  absl::StatusOr<int> Send(const Buffer& buf, int64_t offset, int64_t bytes,
                           int peer, int tag, std::string what) {
    return Start(/*recv=*/false, buf, offset, bytes, peer, tag,
                 std::move(what));
  }
  absl::StatusOr<int> Recv(const Buffer& buf, int64_t offset, int64_t bytes,
                           int peer, int tag, std::string what) {
    return Start(/*recv=*/true, buf, offset, bytes, peer, tag, std::move(what));
  }

  // Waits until request `index` is done (or all of them, index -1),
  // advancing the others meanwhile.
  absl::Status Wait(int index = -1) {
    absl::Time last_progress = absl::Now();
    while (true) {
      bool progress = false;
      for (size_t i = 0; i < reqs_.size(); ++i) {
        Req& r = reqs_[i];
        if (r.done) continue;
        int flag = 0;
        MPI_Status st;
        RETURN_IF_ERROR(Fail(MpiError(MPI_Test(&r.request, &flag, &st),
                                      absl::StrCat(name_, ": ", r.what))));
        if (!flag) continue;
        r.done = true;
        progress = true;
        ++done_;
        if (r.recv) {
          int count = 0;
          MPI_Get_count(&st, MPI_BYTE, &count);
          if (count != r.bytes) {
            return Fail(absl::InvalidArgumentError(absl::StrCat(
                name_, ": process ", r.peer, " sent ", count, " bytes for ",
                r.what, ", this process expects ", r.bytes,
                " (the processes disagree on the tensor's size or type)")));
          }
        }
      }
      if (index >= 0 ? reqs_[index].done : done_ == reqs_.size()) {
        return absl::OkStatus();
      }
      if (progress) {
        last_progress = absl::Now();
        continue;
      }
      if (absl::Status s = (*cancelled_)(); !s.ok()) return Fail(s);
      if (absl::Status s = broken_(); !s.ok()) return Fail(s, false);
      int failed = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kFailTag, comm_, &failed, &st);
      if (failed) {
        int count = 0;
        MPI_Get_count(&st, MPI_CHAR, &count);
        std::string why(static_cast<size_t>(count), '\0');
        MPI_Recv(why.data(), count, MPI_CHAR, st.MPI_SOURCE, kFailTag, comm_,
                 MPI_STATUS_IGNORE);
        return Fail(absl::AbortedError(absl::StrCat(
                        name_, ": process ", st.MPI_SOURCE, " failed: ", why)),
                    /*notify=*/false);
      }
      if (absl::Now() - last_progress > stall_timeout_) {
        std::string waiting;
        for (const Req& r : reqs_) {
          if (!r.done) {
            absl::StrAppend(&waiting, waiting.empty() ? "" : "; ", r.what,
                            r.recv ? " from" : " to", " process ", r.peer);
            break;
          }
        }
        return Fail(absl::DeadlineExceededError(absl::StrCat(
            name_, ": no progress for ", absl::FormatDuration(stall_timeout_),
            ", waiting for ", waiting,
            " (is that process stalled, or did it reach "
            "another collective?)")));
      }
      // MPI moves a large message only while someone calls into it (the
      // shared-memory transport copies fragment by fragment): poll
      // without yielding while messages flow (a yield on a busy machine
      // gives the core away for a whole time slice), then sleep so that
      // a long wait costs no core.
      if (absl::Now() - last_progress >= absl::Milliseconds(1)) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  // Whether the failure should be told to the other processes.
  bool notify() const { return notify_; }

  ~Flight() {
    // On a failure: cancel what is pending and keep its buffers.
    for (Req& r : reqs_) {
      if (r.done || r.request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r.request);
      MPI_Request_free(&r.request);
      KeepForever(r.buf);
    }
  }

 private:
  struct Req {
    MPI_Request request = MPI_REQUEST_NULL;
    Buffer buf;
    int64_t bytes = 0;
    int peer = 0;
    bool recv = false;
    bool done = false;
    std::string what;
  };

  absl::StatusOr<int> Start(bool recv, const Buffer& buf, int64_t offset,
                            int64_t bytes, int peer, int tag,
                            std::string what) {
    Req r;
    r.buf = buf;
    r.bytes = bytes;
    r.peer = peer;
    r.recv = recv;
    r.what = std::move(what);
    char* p = buf->data() + offset;
    const int count = static_cast<int>(bytes);
    const int rc =
        recv ? MPI_Irecv(p, count, MPI_BYTE, peer, tag, comm_, &r.request)
             : MPI_Isend(p, count, MPI_BYTE, peer, tag, comm_, &r.request);
    RETURN_IF_ERROR(Fail(MpiError(rc, absl::StrCat(name_, ": ", r.what))));
    reqs_.push_back(std::move(r));
    return static_cast<int>(reqs_.size() - 1);
  }

  // Every failure but another process's notice is told to the others.
  absl::Status Fail(absl::Status s, bool notify = true) {
    if (!s.ok() && notify) notify_ = true;
    return s;
  }

  MPI_Comm comm_;
  std::string name_;
  const std::function<absl::Status()>* cancelled_;
  std::function<absl::Status()> broken_;
  absl::Duration stall_timeout_;
  std::vector<Req> reqs_;
  size_t done_ = 0;
  bool notify_ = false;
};

}  // namespace ipuflow::distributed::internal

#endif  // IPUFLOW_CORE_DISTRIBUTED_MPI_FLIGHT_H_
