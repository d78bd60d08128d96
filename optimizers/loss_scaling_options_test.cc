// LossScaling in the one validation style (issue 22, item 5): every field
// of every method through 0, -1, its largest value (accepted) and past it,
// NaN and infinities; method values that name no LossScalingMethod. Each
// error names the field, the value and the limit. (Products: a loss
// scaling setting has none; the scale's growth is bounded by these.)
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizers/loss_scaling.h"

namespace ipuflow::optimizers {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Error(const LossScaling& l) {
  absl::Status st = CheckLossScaling(l);
  if (st.ok()) return "OK";
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  return std::string(st.message());
}

struct RealField {
  const char* name;
  std::function<void(LossScaling&, double)> set;
  double lowest_ok, largest;  // Accepted values at the two ends.
  std::vector<double> refused;
};

TEST(LossScalingOptionsTest, EveryRealFieldsWholeRange) {
  const std::vector<RealField> fields = {
      {"loss_scaling",
       [](LossScaling& l, double v) { l = LossScaling::Static(v); },
       1e-30,
       kMaxLossScale,
       {0, -1, 2 * kMaxLossScale, kNaN, kInf, -kInf}},
      {"loss_scaling",
       [](LossScaling& l, double v) { l = LossScaling::Automatic(v); },
       1e-30,
       kMaxLossScale,
       {0, -1, 2 * kMaxLossScale, kNaN, kInf}},
      {"automatic.bin_edge_location",
       [](LossScaling& l, double v) {
         l = LossScaling::Automatic();
         l.automatic.bin_edge_location = v;
       },
       0,
       1,
       {-1, 1.5, kNaN, kInf}},
      {"automatic.threshold_upper_count_proportion",
       [](LossScaling& l, double v) {
         l = LossScaling::Automatic();
         l.automatic.threshold_upper_count_proportion = v;
       },
       0,
       1,
       {-1, 2, kNaN, -kInf}},
      {"grad_scaler.init_scale",
       [](LossScaling& l, double v) {
         l = LossScaling::GradScaler();
         l.grad_scaler.init_scale = v;
       },
       1e-30,
       kMaxLossScale,
       {0, -1, 2 * kMaxLossScale, kNaN, kInf}},
      {"grad_scaler.growth_factor",
       [](LossScaling& l, double v) {
         l = LossScaling::GradScaler();
         l.grad_scaler.growth_factor = v;
       },
       1.0001,
       kMaxGrowthFactor,
       {0, -1, 1, 2 * kMaxGrowthFactor, kNaN, kInf}},
      {"grad_scaler.backoff_factor",
       [](LossScaling& l, double v) {
         l = LossScaling::GradScaler();
         l.grad_scaler.backoff_factor = v;
       },
       1e-30,
       0.9999,
       {0, -1, 1, kNaN, kInf}},
  };
  for (const RealField& f : fields) {
    SCOPED_TRACE(f.name);
    LossScaling l;
    f.set(l, f.lowest_ok);
    EXPECT_EQ(Error(l), "OK");
    f.set(l, f.largest);
    EXPECT_EQ(Error(l), "OK");
    for (double bad : f.refused) {
      f.set(l, bad);
      EXPECT_THAT(Error(l),
                  HasSubstr(absl::StrCat("LossScaling: ", f.name, " is ")))
          << bad;
    }
  }
}

TEST(LossScalingOptionsTest, EveryIntegerFieldsWholeRange) {
  struct IntField {
    const char* name;
    std::function<void(LossScaling&, int)> set;
  };
  const std::vector<IntField> fields = {
      {"automatic.update_period",
       [](LossScaling& l, int v) {
         l = LossScaling::Automatic();
         l.automatic.update_period = v;
       }},
      {"grad_scaler.growth_interval",
       [](LossScaling& l, int v) {
         l = LossScaling::GradScaler();
         l.grad_scaler.growth_interval = v;
       }},
  };
  const std::string range =
      absl::StrCat("; it must be between 1 and ", kMaxLossScalingPeriod);
  for (const IntField& f : fields) {
    SCOPED_TRACE(f.name);
    LossScaling l;
    for (int bad :
         {0, -1, static_cast<int>(kMaxLossScalingPeriod + 1),
          std::numeric_limits<int>::max(), std::numeric_limits<int>::min()}) {
      f.set(l, bad);
      EXPECT_THAT(Error(l),
                  HasSubstr(absl::StrCat(f.name, " is ", bad, range)));
    }
    f.set(l, 1);
    EXPECT_EQ(Error(l), "OK");
    f.set(l, static_cast<int>(kMaxLossScalingPeriod));
    EXPECT_EQ(Error(l), "OK");
  }
}

TEST(LossScalingOptionsTest, MethodMustNameALossScalingMethod) {
  for (int bad : {3, 7, -1}) {
    LossScaling l;
    l.method = static_cast<LossScalingMethod>(bad);
    EXPECT_THAT(Error(l),
                HasSubstr(absl::StrCat("method is ", bad,
                                       ", not a LossScalingMethod (0 kStatic, "
                                       "1 kAutomatic, 2 kGradScaler)")));
  }
  // Every field at fault at once.
  LossScaling l = LossScaling::GradScaler();
  l.grad_scaler.init_scale = -1;
  l.grad_scaler.growth_interval = 0;
  const std::string both = Error(l);
  EXPECT_THAT(both, HasSubstr("grad_scaler.init_scale is -1"));
  EXPECT_THAT(both, HasSubstr("grad_scaler.growth_interval is 0"));
}

}  // namespace
}  // namespace ipuflow::optimizers
