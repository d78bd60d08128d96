// The calling process's resident memory and thread count, from
// /proc/self/status (Linux): what the stress tests hold flat over a run.
#ifndef IPUFLOW_TESTS_STRESS_PROC_STATUS_H_
#define IPUFLOW_TESTS_STRESS_PROC_STATUS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ipuflow::stress {

struct ProcStatus {
  int64_t rss_kib = -1;  // VmRSS.
  int threads = -1;      // Threads.
};

inline ProcStatus ReadProcStatus() {
  ProcStatus st;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return st;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) {
      st.rss_kib = std::strtoll(line + 6, nullptr, 10);
    } else if (std::strncmp(line, "Threads:", 8) == 0) {
      st.threads = static_cast<int>(std::strtol(line + 8, nullptr, 10));
    }
  }
  std::fclose(f);
  return st;
}

// An integer from the environment (to shorten a stress run by hand).
inline int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : fallback;
}

}  // namespace ipuflow::stress

#endif  // IPUFLOW_TESTS_STRESS_PROC_STATUS_H_
