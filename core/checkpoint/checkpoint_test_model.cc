#include "core/checkpoint/checkpoint_test_model.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "core/status.h"
#include "feeds/dataset.h"
#include "gtest/gtest.h"
#include "ops/control/loops.h"
#include "ops/math/cast.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/square.h"
#include "ops/math/sub.h"
#include "ops/nn/ipu_dropout.h"
#include "ops/state/random.h"
#include "ops/state/variable.h"

namespace ipuflow::checkpoint::testing {
namespace {

optimizers::WeightUpdateOptions WeightUpdate(const RunConfig& cfg) {
  optimizers::WeightUpdateOptions o;
  o.offload_weight_update_variables = cfg.offload_sharded;
  o.replicated_optimizer_state_sharding = cfg.offload_sharded;
  return o;
}

optimizers::GradScalerSettings Scaler() {
  optimizers::GradScalerSettings g;
  g.init_scale = 256;
  g.growth_interval = 2;
  return g;
}

}  // namespace

feeds::DatasetPtr Samples(int64_t samples) {
  std::vector<float> x, y;
  std::vector<int32_t> id;
  for (int i = 0; i < samples; ++i) {
    x.insert(x.end(), {std::sin(0.7f * i), 0.5f * std::cos(1.3f * i),
                       static_cast<float>(i % 7) / 7, 1});
    y.push_back(std::cos(0.3f * i));
    id.push_back(i);
  }
  return feeds::FromTensorSlices({Tensor::FromVector(x, {samples, 4}),
                                  Tensor::FromVector(y, {samples}),
                                  Tensor::FromVector(id, {samples})});
}

absl::StatusOr<TrainingFeeds> MakeTrainingFeeds(
    const CheckpointContents* resume, feeds::DatasetPtr samples,
    const feeds::DataLoaderOptions& options) {
  TrainingFeeds f;
  if (resume != nullptr) {
    ASSIGN_OR_RETURN(
        f.loader,
        feeds::ResumeDataLoader(*resume, "train", std::move(samples), options));
  } else {
    ASSIGN_OR_RETURN(f.loader,
                     feeds::DataLoader::Create(std::move(samples), options));
  }
  ASSIGN_OR_RETURN(feeds::DatasetPtr micro, f.loader->ToInfeedDataset());
  ASSIGN_OR_RETURN(
      f.infeed, feeds::IPUInfeedQueue::Create(micro->Repeat(),
                                              feeds::InfeedOptions{"train"}));
  ASSIGN_OR_RETURN(f.outfeed, feeds::IPUOutfeedQueue::Create());
  return f;
}

TrainingRun::TrainingRun(const RunConfig& cfg, const CheckpointContents* resume)
    : adam_(0.01f),
      ga_(&adam_, cfg.accumulation,
          optimizers::GradientAccumulationReductionMethod::kSum,
          optimizers::ReplicaReduction::kMean, {}, WeightUpdate(cfg)),
      ls_(&ga_, optimizers::LossScaling::GradScaler(Scaler())) {
  adam_.set_master_weights(true);
  Build(cfg, resume);
}

TrainingRun::~TrainingRun() { strategy_.reset(); }

void TrainingRun::Build(const RunConfig& cfg,
                        const CheckpointContents* resume) {
  IPUConfig config;
  config.set_auto_select_ipus(cfg.replicas);
  config.set_replication_factor(cfg.replicas);
  config.set_seed(1234);
  if (cfg.stochastic_rounding) {
    config.mutable_floating_point_behaviour()->set_esr(
        FloatingPointBehaviourConfig::ON);
  }
  system_ = std::move(IPUSystem::Create(config)).value();
  if (cfg.link != nullptr) {
    status_ = system_->SetProcessLink(cfg.link);
    if (!status_.ok()) return;
  }
  feeds::DataLoaderOptions o;
  o.batch_size = kBatch;
  o.replicas = cfg.replicas;
  o.gradient_accumulation =
      cfg.loader_accumulation > 0 ? cfg.loader_accumulation : cfg.accumulation;
  o.shuffle = true;
  o.seed = 99;
  o.mode = feeds::DataLoaderMode::kAsync;
  o.num_workers = 2;
  if (cfg.link != nullptr) {
    o.process_index = cfg.link->process_index();
    o.process_count = cfg.link->process_count();
  }
  absl::StatusOr<TrainingFeeds> fed =
      MakeTrainingFeeds(resume, Samples(cfg.samples), o);
  status_ = fed.status();
  if (!fed.ok()) return;
  loader_ = std::move(fed->loader);
  infeed_ = std::move(fed->infeed);
  outfeed_ = std::move(fed->outfeed);
  Scope s = Scope::NewRootScope();
  graph_ = s.graph();
  scope_ = std::make_unique<Scope>(s);
  auto w = ops::Variable(
      s.WithOpName("w"),
      ops::Cast(s,
                ops::RandomUniform(s, {4, cfg.variable_width}, -0.5f, 0.5f, 11),
                DType::kFloat16));
  if (cfg.extra_variable) {
    ops::Variable(s.WithOpName("extra"), ops::RandomUniform(s, {2}, -1, 1, 12));
  }
  auto loop = loops::Repeat(
      s, cfg.loop_iterations > 0 ? cfg.loop_iterations : cfg.accumulation,
      [&](const Scope& b, const std::vector<Output>& args) {
        Output h =
            ops::MatMul(b, ops::Cast(b, args[0], DType::kFloat16), w.value);
        Output d = ops::IpuDropout(b, h, 0.25f, 5).output;
        Output pred = ops::ReduceSum(b, ops::Cast(b, d, DType::kFloat32), {1});
        Output loss =
            ops::ReduceMean(b, ops::Square(b, ops::Sub(b, pred, args[1])));
        ls_.Minimize(b, loss);
        outfeed_->Enqueue(b, {{"loss", loss}, {"id", args[2]}});
        return std::vector<Output>{};
      },
      {}, infeed_.get());
  status_ = loop.status();
  if (!status_.ok()) return;
  strategy_ = std::make_unique<IPUStrategy>(system_.get());
  auto exe = strategy_->Compile(*graph_, {}, {loop->op});
  status_ = exe.status();
  if (!status_.ok()) return;
  exe_ = *exe;
  status_ = strategy_->Initialize(*graph_);
  if (!status_.ok()) return;
  ckpt_ = std::make_unique<TrainingCheckpoint>(graph_, exe_);
  if (resume != nullptr && cfg.restore) status_ = ckpt_->Restore(*resume);
}

absl::Status TrainingRun::Train(int n) {
  for (int i = 0; i < n; ++i) {
    RETURN_IF_ERROR(
        ExecuteAndRecord(exe_, outfeed_.get(), "loss", "id", &losses, &ids));
  }
  return absl::OkStatus();
}

std::map<std::string, std::vector<Tensor>> TrainingRun::Variables() {
  return std::move(exe_->ReadVariables(".*")).value();
}

absl::Status ExecuteAndRecord(DeviceProgram* exe,
                              feeds::IPUOutfeedQueue* outfeed,
                              const std::string& loss, const std::string& id,
                              std::vector<float>* losses,
                              std::vector<int32_t>* ids) {
  std::vector<std::vector<Tensor>> none;
  RETURN_IF_ERROR(exe->Execute({{}}, &none));
  ASSIGN_OR_RETURN(feeds::OutfeedResult r, outfeed->Dequeue());
  const Tensor& l = r[loss];
  const Tensor& i = r[id];
  losses->insert(losses->end(), l.data<float>(),
                 l.data<float>() + l.NumElements());
  ids->insert(ids->end(), i.data<int32_t>(),
              i.data<int32_t>() + i.NumElements());
  return absl::OkStatus();
}

void ExpectBitwise(const std::map<std::string, std::vector<Tensor>>& a,
                   const std::map<std::string, std::vector<Tensor>>& b,
                   const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, per] : a) {
    ASSERT_EQ(b.count(name), 1u) << what << " " << name;
    const auto& other = b.at(name);
    ASSERT_EQ(per.size(), other.size()) << what << " " << name;
    for (size_t r = 0; r < per.size(); ++r) {
      ASSERT_EQ(per[r].TotalBytes(), other[r].TotalBytes())
          << what << " " << name;
      EXPECT_EQ(std::memcmp(per[r].raw_data(), other[r].raw_data(),
                            per[r].TotalBytes()),
                0)
          << what << ": variable " << name << " replica " << r;
    }
  }
}

}  // namespace ipuflow::checkpoint::testing
