#include "core/distributed/mpi_flight.h"

#include "core/mutex.h"

namespace ipuflow::distributed::internal {
namespace {

Mutex graveyard_mu;
std::vector<Buffer>* graveyard ABSL_GUARDED_BY(graveyard_mu) = nullptr;

}  // namespace

Buffer NewBuffer(int64_t bytes) {
  return std::make_shared<std::vector<char>>(static_cast<size_t>(bytes));
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
