#include "examples/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ipuflow::examples {

void DrawProgress(int64_t done, int64_t total, float loss, float accuracy) {
  static const bool tty = isatty(fileno(stderr));
  const int64_t every = std::max<int64_t>(1, total / (tty ? 100 : 10));
  if (done % every != 0 && done != total) return;
  const int width = 30;
  const int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "%s[%.*s%*s] %lld/%lld  loss %.4f  accuracy %.2f%%%s",
               tty ? "\r" : "", filled, "==============================",
               width - filled, "", static_cast<long long>(done),
               static_cast<long long>(total), loss, 100 * accuracy,
               tty ? "" : "\n");
  if (tty && done == total) std::fprintf(stderr, "\n");
}

}  // namespace ipuflow::examples
