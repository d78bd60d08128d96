#include "core/distributed/mpi_link.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_flight.h"
#include "core/distributed/mpi_job.h"
#include "core/half.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ipuflow::distributed {

struct MpiLink::Wire {
  MPI_Comm comm = MPI_COMM_NULL;
};

namespace {

using internal::Buffer;
using internal::Flight;
using internal::KeepForever;
using internal::kFailTag;
using internal::MpiError;
using internal::NewBuffer;

// Tags: ((hash mod (2^28 - 1)) + 1) << 2 | kind, so data tags never use
// slot 0, whose kind 1 is the failure notice. The MPI standard promises
// tags up to 32767 only; Open MPI gives 2^31 - 1, which World() checks.
constexpr int kAcc = 0, kFinal = 1, kGather = 2, kBcast = 3;

// The group's processes in rank order, this process's position among
// them, and the first rank and rank count of each.
struct Chain {
  std::vector<int> processes;
  std::vector<int> first_rank;
  std::vector<int> ranks;
  int me = -1;
};

absl::StatusOr<Chain> ChainOf(const ProcessLink::Collective& c, int self) {
  Chain chain;
  for (size_t k = 0; k < c.member_process.size(); ++k) {
    const int p = c.member_process[k];
    if (!chain.processes.empty() && p < chain.processes.back()) {
      return absl::InternalError(
          absl::StrCat(c.name, ": members not in process order"));
    }
    if (chain.processes.empty() || p != chain.processes.back()) {
      chain.processes.push_back(p);
      chain.first_rank.push_back(static_cast<int>(k));
      chain.ranks.push_back(0);
    }
    ++chain.ranks.back();
  }
  for (size_t i = 0; i < chain.processes.size(); ++i) {
    if (chain.processes[i] == self) chain.me = static_cast<int>(i);
  }
  if (chain.me < 0 ||
      chain.ranks[chain.me] != static_cast<int>(c.local.size())) {
    return absl::InternalError(
        absl::StrCat(c.name, ": this process holds ", c.local.size(),
                     " members, the group's layout says otherwise"));
  }
  return chain;
}

// acc[0, len) (elements [off, off + len) of the tensor) += this process's
// members in rank order; the first process starts the sum from its first
// member, as CollectiveGroup::ReduceInto does in one process.
template <typename T>
void FoldChunk(T* acc, const std::vector<const void*>& local, int64_t off,
               int64_t len, bool first, bool last_divides, int group_size) {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<Arr> a(acc, len);
  auto in = [&](size_t k) {
    return Eigen::Map<const Arr>(static_cast<const T*>(local[k]) + off, len);
  };
  size_t k = 0;
  if (first) {
    if (local.size() == 1) {
      a = in(0);
    } else {
      a = in(0) + in(1);
    }
    k = std::min<size_t>(2, local.size());
  }
  for (; k < local.size(); ++k) a += in(k);
  if (last_divides) a /= static_cast<T>(group_size);
}

// MPI_Comm_dup waits for every process, also one that refused its identity
// and will never call it: the non-blocking form, polled until `timeout`.
absl::Status DupWorld(absl::Duration timeout, MPI_Comm* comm) {
  MPI_Request r;
  RETURN_IF_ERROR(internal::FailJob(
      MpiError(MPI_Comm_idup(MPI_COMM_WORLD, comm, &r), "MPI_Comm_idup")));
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int done = 0;
    RETURN_IF_ERROR(internal::FailJob(
        MpiError(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Comm_idup")));
    if (done) return absl::OkStatus();
    if (absl::Now() > deadline) {
      // `r` stays pending: MPI cannot cancel a collective.
      return internal::FailJob(absl::DeadlineExceededError(absl::StrCat(
          "MpiLink::World: not every process joined the link's communicator "
          "(MPI_Comm_idup) within start_timeout ",
          absl::FormatDuration(timeout),
          " (did one refuse its identity, fail or stall before it?)")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

MpiLink::MpiLink(ProcessIdentity identity, Options options,
                 std::unique_ptr<Wire> w)
    : identity_(std::move(identity)), options_(options), wire_(std::move(w)) {}

MpiLink::~MpiLink() = default;

absl::StatusOr<std::shared_ptr<MpiLink>> MpiLink::World(Options options) {
  static Mutex mu;
  static std::shared_ptr<MpiLink>* world = nullptr;  // Never destroyed.
  MutexLock l(&mu);
  if (world != nullptr) return *world;
  if (options.chunk_bytes < 1 || options.chunk_bytes > (1 << 30) ||
      options.stall_timeout <= absl::ZeroDuration() ||
      options.start_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MpiLink options: chunk_bytes ", options.chunk_bytes,
        " must be in [1, 2^30], stall_timeout ",
        absl::FormatDuration(options.stall_timeout), " and start_timeout ",
        absl::FormatDuration(options.start_timeout), " positive"));
  }
  // A failure from here on is recorded (FailJob): the other processes may
  // wait for this one, so its exit must end the job (mpi_job.h).
  RETURN_IF_ERROR(internal::StartMpi(options.start_timeout));
  if (absl::Status s = internal::JobFailure(); !s.ok()) return s;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  absl::StatusOr<ProcessIdentity> env = ProcessIdentityFromEnvironment();
  if (!env.ok()) return internal::FailJob(env.status());
  if (env->source != "single process" &&
      (env->process_index != rank || env->process_count != size)) {
    return internal::FailJob(absl::InvalidArgumentError(
        absl::StrCat("the launcher's environment says ", env->DebugString(),
                     ", MPI says process ", rank, " of ", size)));
  }
  absl::StatusOr<ProcessIdentity> configured = ConfigureProcessId(rank, size);
  if (!configured.ok()) return internal::FailJob(configured.status());
  ProcessIdentity id = *std::move(configured);
  id.source = env->source == "single process" ? "MPI" : env->source;
  id.total_replicas = env->total_replicas;
  id.local_replicas = env->local_replicas;
  id.replica_index_offset = env->replica_index_offset;

  int* tag_ub = nullptr;
  int has_ub = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has_ub);
  if (!has_ub || *tag_ub < (1 << 30) + 3) {
    return internal::FailJob(absl::FailedPreconditionError(absl::StrCat(
        "MPI_TAG_UB is ", has_ub ? *tag_ub : -1, "; ipuflow needs 2^30 + 3")));
  }
  auto wire = std::make_unique<Wire>();
  RETURN_IF_ERROR(DupWorld(options.start_timeout, &wire->comm));
  MPI_Comm_set_errhandler(wire->comm, MPI_ERRORS_RETURN);
  world = new std::shared_ptr<MpiLink>(
      new MpiLink(std::move(id), options, std::move(wire)));
  return *world;
}

absl::StatusOr<int> MpiLink::TagOf(uint64_t tag, const std::string& name,
                                   int kind) {
  const int slot = static_cast<int>(tag % ((1u << 28) - 1)) + 1;
  MutexLock l(&mu_);
  auto [it, inserted] = tag_names_.emplace(slot, name);
  if (!inserted && it->second != name) {
    return absl::FailedPreconditionError(
        absl::StrCat("collectives '", it->second, "' and '", name,
                     "' share wire tag ", slot, "; rename one of them"));
  }
  return slot << 2 | kind;
}

absl::Status MpiLink::Fail(bool notify, absl::Status s) {
  if (notify) NotifyFailure(s);  // Also marks the link broken.
  // FailJob returns `s`, which is kept below.
  internal::FailJob(s).IgnoreError();
  MutexLock l(&mu_);
  if (broken_.ok()) broken_ = s;
  return s;
}

absl::Status MpiLink::Broken() const {
  MutexLock l(&mu_);
  return broken_;
}

void MpiLink::NotifyFailure(const absl::Status& why) {
  internal::FailJob(why).IgnoreError();  // It returns `why`.
  {
    MutexLock l(&mu_);
    if (broken_.ok()) broken_ = why;
    if (notified_) return;
    notified_ = true;
  }
  const std::string text = why.ToString();
  auto buf = NewBuffer(static_cast<int64_t>(text.size()));
  std::memcpy(buf->data(), text.data(), text.size());
  KeepForever(buf);
  for (int p = 0; p < process_count(); ++p) {
    if (p == process_index()) continue;
    MPI_Request r;
    if (MPI_Isend(buf->data(), static_cast<int>(text.size()), MPI_CHAR, p,
                  kFailTag, wire_->comm, &r) == MPI_SUCCESS) {
      MPI_Request_free(&r);
    }
  }
}

absl::Status MpiLink::FoldAcross(const Collective& c, bool mean, void* out) {
  RETURN_IF_ERROR(Broken());
  ASSIGN_OR_RETURN(const Chain chain, ChainOf(c, process_index()));
  ASSIGN_OR_RETURN(const int acc_tag, TagOf(c.tag, c.name, kAcc));
  const int final_tag = acc_tag - kAcc + kFinal;
  const int64_t esize = static_cast<int64_t>(DTypeSize(c.dtype));
  const int64_t bytes = c.n * esize;
  const int64_t chunk = std::max<int64_t>(1, options_.chunk_bytes / esize);
  const int64_t chunks = (c.n + chunk - 1) / chunk;
  const int q = static_cast<int>(chain.processes.size());
  const int i = chain.me;
  const bool last = i == q - 1;
  const int group_size = static_cast<int>(c.member_process.size());

  Buffer acc = NewBuffer(bytes);
  Buffer fin = last ? acc : NewBuffer(bytes);
  Flight f(
      wire_->comm, c.name, &c.cancelled, [this] { return Broken(); },
      options_.stall_timeout);
  auto fail = [&](absl::Status s) { return Fail(f.notify(), std::move(s)); };
  auto span = [&](int64_t k) {
    const int64_t off = k * chunk;
    return std::pair<int64_t, int64_t>(off, std::min(chunk, c.n - off));
  };
  // Every receive is posted first: no sender ever waits for a receiver
  // that is itself blocked sending (the chain and the results overlap).
  std::vector<int> acc_recv(chunks, -1);
  for (int64_t k = 0; k < chunks; ++k) {
    const auto [off, len] = span(k);
    if (i > 0) {
      auto r = f.Recv(acc, off * esize, len * esize, chain.processes[i - 1],
                      acc_tag, absl::StrCat("partial sum chunk ", k));
      if (!r.ok()) return fail(r.status());
      acc_recv[k] = *r;
    }
    if (!last) {
      auto r = f.Recv(fin, off * esize, len * esize, chain.processes[q - 1],
                      final_tag, absl::StrCat("result chunk ", k));
      if (!r.ok()) return fail(r.status());
    }
  }
  for (int64_t k = 0; k < chunks; ++k) {
    const auto [off, len] = span(k);
    if (i > 0) {
      if (absl::Status s = f.Wait(acc_recv[k]); !s.ok()) return fail(s);
    }
    IPUFLOW_SWITCH_NUMERIC(
        c.dtype,
        FoldChunk<T>(reinterpret_cast<T*>(acc->data()) + off, c.local, off, len,
                     /*first=*/i == 0, /*last_divides=*/last && mean,
                     group_size),
        return fail(absl::InvalidArgumentError(
            absl::StrCat(c.name, ": ", DTypeName(c.dtype)))));
    if (!last) {
      auto r = f.Send(acc, off * esize, len * esize, chain.processes[i + 1],
                      acc_tag, absl::StrCat("partial sum chunk ", k));
      if (!r.ok()) return fail(r.status());
    } else {
      for (int p = 0; p < q - 1; ++p) {
        auto r = f.Send(acc, off * esize, len * esize, chain.processes[p],
                        final_tag, absl::StrCat("result chunk ", k));
        if (!r.ok()) return fail(r.status());
      }
    }
  }
  if (absl::Status s = f.Wait(); !s.ok()) return fail(s);
  std::memcpy(out, fin->data(), bytes);
  return absl::OkStatus();
}

absl::Status MpiLink::GatherAcross(const Collective& c, void* out) {
  RETURN_IF_ERROR(Broken());
  ASSIGN_OR_RETURN(const Chain chain, ChainOf(c, process_index()));
  ASSIGN_OR_RETURN(const int tag, TagOf(c.tag, c.name, kGather));
  const int64_t esize = static_cast<int64_t>(DTypeSize(c.dtype));
  const int64_t block = c.n * esize;  // One member's input.
  const int group_size = static_cast<int>(c.member_process.size());
  Buffer all = NewBuffer(block * group_size);
  const int64_t mine = chain.first_rank[chain.me] * block;
  for (size_t k = 0; k < c.local.size(); ++k) {
    std::memcpy(all->data() + mine + k * block, c.local[k], block);
  }
  Flight f(
      wire_->comm, c.name, &c.cancelled, [this] { return Broken(); },
      options_.stall_timeout);
  auto fail = [&](absl::Status s) { return Fail(f.notify(), std::move(s)); };
  const int64_t chunk = options_.chunk_bytes;
  for (size_t p = 0; p < chain.processes.size(); ++p) {
    if (static_cast<int>(p) == chain.me) continue;
    const int peer = chain.processes[p];
    const int64_t theirs = chain.first_rank[p] * block;
    const int64_t their_bytes = chain.ranks[p] * block;
    const int64_t my_bytes = chain.ranks[chain.me] * block;
    for (int64_t off = 0; off < std::max(their_bytes, my_bytes); off += chunk) {
      if (off < their_bytes) {
        auto r = f.Recv(all, theirs + off, std::min(chunk, their_bytes - off),
                        peer, tag, absl::StrCat("inputs at byte ", off));
        if (!r.ok()) return fail(r.status());
      }
      if (off < my_bytes) {
        auto r = f.Send(all, mine + off, std::min(chunk, my_bytes - off), peer,
                        tag, absl::StrCat("inputs at byte ", off));
        if (!r.ok()) return fail(r.status());
      }
    }
  }
  if (absl::Status s = f.Wait(); !s.ok()) return fail(s);
  std::memcpy(out, all->data(), all->size());
  return absl::OkStatus();
}

absl::Status MpiLink::Broadcast(
    uint64_t tag, int root, void* data, int64_t bytes,
    const std::function<absl::Status()>& cancelled) {
  RETURN_IF_ERROR(Broken());
  if (root < 0 || root >= process_count() || bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Broadcast: root ", root, " of ", process_count(),
                     " processes, ", bytes, " bytes"));
  }
  const std::string name = absl::StrCat("broadcast ", tag);
  ASSIGN_OR_RETURN(const int wire_tag, TagOf(tag, name, kBcast));
  Buffer buf = NewBuffer(bytes);
  const bool is_root = root == process_index();
  if (is_root) std::memcpy(buf->data(), data, bytes);
  Flight f(
      wire_->comm, name, &cancelled, [this] { return Broken(); },
      options_.stall_timeout);
  const int64_t chunk = options_.chunk_bytes;
  for (int64_t off = 0; off < bytes; off += chunk) {
    const int64_t len = std::min(chunk, bytes - off);
    for (int p = 0; p < process_count(); ++p) {
      if (p == process_index() || (!is_root && p != root)) continue;
      auto r = is_root ? f.Send(buf, off, len, p, wire_tag, "data")
                       : f.Recv(buf, off, len, p, wire_tag, "data");
      if (!r.ok()) return Fail(f.notify(), r.status());
    }
  }
  if (absl::Status s = f.Wait(); !s.ok()) return Fail(f.notify(), s);
  if (!is_root) std::memcpy(data, buf->data(), bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MpiLink::AllGatherStrings(
    uint64_t tag, const std::string& mine) {
  RETURN_IF_ERROR(Broken());
  const std::string name = absl::StrCat("string gather ", tag);
  ASSIGN_OR_RETURN(const int size_tag, TagOf(tag, name, kGather));
  const int data_tag = size_tag - kGather + kBcast;
  const int n = process_count(), me = process_index();
  const std::function<absl::Status()> never = [] { return absl::OkStatus(); };
  // Round 1: the sizes; round 2: the strings. Any failure breaks the link
  // (and tells the peers), as in the other collectives.
  Buffer sizes = NewBuffer(n * sizeof(int64_t));
  const int64_t my_size = static_cast<int64_t>(mine.size());
  std::memcpy(sizes->data() + me * sizeof(int64_t), &my_size, sizeof(my_size));
  auto exchange = [&](const Buffer& buf, const std::vector<int64_t>& offset,
                      const std::vector<int64_t>& len, int wire_tag,
                      const char* what) -> absl::Status {
    Flight f(
        wire_->comm, name, &never, [this] { return Broken(); },
        options_.stall_timeout);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      if (len[p] > 0) {
        auto r = f.Recv(buf, offset[p], len[p], p, wire_tag, what);
        if (!r.ok()) return Fail(f.notify(), r.status());
      }
      if (len[me] > 0) {
        auto r = f.Send(buf, offset[me], len[me], p, wire_tag, what);
        if (!r.ok()) return Fail(f.notify(), r.status());
      }
    }
    if (absl::Status s = f.Wait(); !s.ok()) return Fail(f.notify(), s);
    return absl::OkStatus();
  };
  std::vector<int64_t> size_offset(n), size_len(n, sizeof(int64_t));
  for (int p = 0; p < n; ++p) size_offset[p] = p * sizeof(int64_t);
  RETURN_IF_ERROR(exchange(sizes, size_offset, size_len, size_tag, "size"));
  std::vector<int64_t> len(n);
  std::memcpy(len.data(), sizes->data(), n * sizeof(int64_t));
  std::vector<int64_t> offset(n + 1, 0);
  for (int p = 0; p < n; ++p) {
    if (len[p] < 0 || len[p] > (int64_t{1} << 30)) {
      return Fail(/*notify=*/true,
                  absl::DataLossError(absl::StrCat(
                      name, ": process ", p, " announced a string of ", len[p],
                      " bytes (at most 2^30)")));
    }
    offset[p + 1] = offset[p] + len[p];
  }
  Buffer all = NewBuffer(offset[n]);
  std::memcpy(all->data() + offset[me], mine.data(), mine.size());
  RETURN_IF_ERROR(exchange(all, offset, len, data_tag, "string"));
  std::vector<std::string> result(n);
  for (int p = 0; p < n; ++p) {
    result[p].assign(all->data() + offset[p], len[p]);
  }
  return result;
}

}  // namespace ipuflow::distributed
