// LossScaling's option checks (CheckLossScaling) and the wrapper's own
// (LossScalingOptimizer::Validate): every value's range, the methods'
// combinations. The scaling itself is in loss_scaling.cc.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/option_checks.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/loss_scaling.h"

namespace ipuflow::optimizers {

absl::Status CheckLossScaling(const LossScaling& l) {
  OptionChecker check("LossScaling");
  check.Enum("method", "LossScalingMethod", l.method,
             {{LossScalingMethod::kStatic, "kStatic"},
              {LossScalingMethod::kAutomatic, "kAutomatic"},
              {LossScalingMethod::kGradScaler, "kGradScaler"}});
  // (0, hi]: FiniteRange is inclusive, so 0 is reported on its own.
  auto positive = [&check](const char* field, double v, double hi) {
    if (v == 0) {
      check.Fail(absl::StrCat(field,
                              " is 0; it must be a finite number "
                              "above 0 and at most ",
                              hi));
    } else {
      check.FiniteRange(field, v, 0, hi);
    }
  };
  if (l.method != LossScalingMethod::kGradScaler) {
    positive("loss_scaling", l.loss_scaling, kMaxLossScale);
  }
  if (l.method == LossScalingMethod::kAutomatic) {
    const AutomaticLossScalingSettings& a = l.automatic;
    check.FiniteRange("automatic.bin_edge_location", a.bin_edge_location, 0, 1);
    check.FiniteRange("automatic.threshold_upper_count_proportion",
                      a.threshold_upper_count_proportion, 0, 1);
    check.Range("automatic.update_period", a.update_period, 1,
                kMaxLossScalingPeriod);
  }
  if (l.method == LossScalingMethod::kGradScaler) {
    const GradScalerSettings& g = l.grad_scaler;
    positive("grad_scaler.init_scale", g.init_scale, kMaxLossScale);
    if (g.growth_factor == 1) {
      check.Fail(
          "grad_scaler.growth_factor is 1; it must be above 1 and at "
          "most 65536");
    } else {
      check.FiniteRange("grad_scaler.growth_factor", g.growth_factor, 1,
                        kMaxGrowthFactor);
    }
    if (g.backoff_factor == 0 || g.backoff_factor == 1) {
      check.Fail(absl::StrCat("grad_scaler.backoff_factor is ",
                              g.backoff_factor,
                              "; it must be between 0 and 1, both excluded"));
    } else {
      check.FiniteRange("grad_scaler.backoff_factor", g.backoff_factor, 0, 1);
    }
    check.Range("grad_scaler.growth_interval", g.growth_interval, 1,
                kMaxLossScalingPeriod);
  }
  return check.status();
}

absl::Status LossScalingOptimizer::Validate() const {
  if (optimizer_ == nullptr) {
    return absl::InvalidArgumentError(
        "LossScaling optimizer: the optimizer to wrap is null");
  }
  const LossScaling& l = scaling_;
  if (l.method != LossScalingMethod::kGradScaler &&
      !(l.loss_scaling > 0 && std::isfinite(l.loss_scaling))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LossScaling optimizer: loss_scaling must be finite and > 0, got ",
        l.loss_scaling));
  }
  if (l.method == LossScalingMethod::kAutomatic) {
    const AutomaticLossScalingSettings& a = l.automatic;
    if (!(a.bin_edge_location >= 0 && a.bin_edge_location <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          kAutomaticLossScaleError,
          "Out of range value for 'binEdgeLocation'. The current value "
          "is ",
          a.bin_edge_location, ", but it should be in the range [0, 1]."));
    }
    if (!(a.threshold_upper_count_proportion >= 0 &&
          a.threshold_upper_count_proportion <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          kAutomaticLossScaleError,
          "Out of range value for 'thresholdUpperCountProportion'. The "
          "current value is ",
          a.threshold_upper_count_proportion,
          ", but it should be in the range [0, 1]."));
    }
    if (a.update_period < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kAutomaticLossScaleError,
                       "'updatePeriod' must be >= 1 (optimizer steps between "
                       "updates of the loss scale), got ",
                       a.update_period));
    }
  }
  if (l.method == LossScalingMethod::kGradScaler) {
    const GradScalerSettings& g = l.grad_scaler;
    // PyTorch's own asserts, then what it leaves unchecked.
    if (!(g.growth_factor > 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GradScaler: The growth factor must be > 1.0. (got ",
                       g.growth_factor, ")"));
    }
    if (!(g.backoff_factor < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GradScaler: The backoff factor must be < 1.0. (got ",
                       g.backoff_factor, ")"));
    }
    if (!(g.backoff_factor > 0) || !(g.init_scale > 0) ||
        !std::isfinite(g.init_scale) || g.growth_interval < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GradScaler: init_scale (", g.init_scale, ") and backoff_factor (",
          g.backoff_factor, ") must be > 0 and growth_interval (",
          g.growth_interval, ") >= 1"));
    }
    if (optimizer_->accumulates_gradients() &&
        dynamic_cast<const GradientAccumulationOptimizer*>(optimizer_) ==
            nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "LossScaling optimizer: GradScaler around the gradient-accumulating "
          "optimizer '",
          optimizer_->name(),
          "' is not supported (the skipped "
          "step would have to cover its own conditional update); use "
          "LossScaling::Automatic, or a pipeline, which accumulates itself"));
    }
  }
  // What the PyTorch / PopART texts above leave: enum values, upper
  // bounds, infinities.
  return CheckLossScaling(l);
}

}  // namespace ipuflow::optimizers
