#include "core/distributed/mpi_flight.h"

#include "core/mutex.h"

namespace ipuflow::distributed::internal {
namespace {

Mutex graveyard_mu;
std::vector<Buffer>* graveyard ABSL_GUARDED_BY(graveyard_mu) = nullptr;

// Buffers given back by finished calls, for the next ones: a step's
// collectives have the same sizes every step, and a fresh buffer costs a
// page fault and a zeroing write per 4 KiB (at 64 MiB, more than the
// transfer's own copies). At most kPoolBytes are kept.
constexpr size_t kPoolBytes = size_t{256} << 20;
Mutex pool_mu;
std::vector<std::vector<char>*>* pool ABSL_GUARDED_BY(pool_mu) = nullptr;
size_t pool_bytes ABSL_GUARDED_BY(pool_mu) = 0;

void GiveBack(std::vector<char>* v) {
  {
    MutexLock l(&pool_mu);
    if (pool == nullptr) pool = new std::vector<std::vector<char>*>();
    if (pool_bytes + v->capacity() <= kPoolBytes) {
      pool_bytes += v->capacity();
      pool->push_back(v);
      return;
    }
  }
  delete v;
}

}  // namespace

Buffer NewBuffer(int64_t bytes) {
  const size_t n = static_cast<size_t>(bytes);
  std::vector<char>* v = nullptr;
  {
    MutexLock l(&pool_mu);
    if (pool != nullptr) {
      // The smallest kept buffer that holds `n` without growing.
      auto best = pool->end();
      for (auto it = pool->begin(); it != pool->end(); ++it) {
        if ((*it)->capacity() >= n &&
            (best == pool->end() || (*it)->capacity() < (*best)->capacity())) {
          best = it;
        }
      }
      if (best != pool->end()) {
        v = *best;
        pool_bytes -= v->capacity();
        pool->erase(best);
      }
    }
  }
  if (v == nullptr) v = new std::vector<char>();
  v->resize(n);  // Within capacity: no allocation, no zeroing of old bytes.
  return Buffer(v, GiveBack);
}

absl::Status MpiError(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return absl::InternalError(
      absl::StrCat(what, ": MPI error ", std::string(text, len)));
}

void KeepForever(const Buffer& b) {
  MutexLock l(&graveyard_mu);
  if (graveyard == nullptr) graveyard = new std::vector<Buffer>();
  graveyard->push_back(b);
}

}  // namespace ipuflow::distributed::internal
