// Error-handling helpers for absl::Status / absl::StatusOr.
//
// Debian's Abseil (20220623) ships neither status macros nor absl/log, so
// ipuflow defines the two macros every layer uses and an internal CHECK for
// invariants that only a bug can break (never for user errors: those return
// absl::Status).
//
//   absl::StatusOr<Tensor> Load(const std::string& path) {
//     RETURN_IF_ERROR(CheckPath(path));
//     ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
//     return Parse(bytes);
//   }
#ifndef IPUFLOW_CORE_STATUS_H_
#define IPUFLOW_CORE_STATUS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define IPUFLOW_CONCAT_INNER_(a, b) a##b
#define IPUFLOW_CONCAT_(a, b) IPUFLOW_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status ipuflow_status_ = (expr);           \
    if (!ipuflow_status_.ok()) return ipuflow_status_; \
  } while (false)

// `ASSIGN_OR_RETURN(T x, StatusOrExpr)`: declares/assigns `x` or returns the
// error.
#define ASSIGN_OR_RETURN(lhs, expr)                                         \
  IPUFLOW_ASSIGN_OR_RETURN_IMPL_(IPUFLOW_CONCAT_(statusor_, __LINE__), lhs, \
                                 expr)
#define IPUFLOW_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return statusor.status();             \
  lhs = std::move(statusor).value()

// Aborts on a broken internal invariant. Not for user input.
#define IPU_CHECK(cond)                                               \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: IPU_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                  \
      std::abort();                                                   \
    }                                                                 \
  } while (false)

#define IPU_CHECK_OK(expr)                                               \
  do {                                                                   \
    ::absl::Status ipuflow_check_status_ = (expr);                       \
    if (!ipuflow_check_status_.ok()) {                                   \
      std::fprintf(stderr, "%s:%d: IPU_CHECK_OK failed: %s\n", __FILE__, \
                   __LINE__, ipuflow_check_status_.ToString().c_str());  \
      std::abort();                                                      \
    }                                                                    \
  } while (false)

#endif  // IPUFLOW_CORE_STATUS_H_
