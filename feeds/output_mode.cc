#include "feeds/output_mode.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::feeds {

std::string OutputMode::DebugString() const {
  switch (kind) {
    case Kind::kAll:
      return "All";
    case Kind::kFinal:
      return "Final";
    case Kind::kSum:
      return "Sum";
    case Kind::kEveryN:
      return absl::StrCat("EveryN(", period, ")");
    case Kind::kDefault:
      return "Default";
  }
  return "?";
}

}  // namespace ipuflow::feeds
