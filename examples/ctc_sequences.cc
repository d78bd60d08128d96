#include "examples/ctc_sequences.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "examples/models.h"
#include "examples/tutorial_support.h"
#include "feeds/data_loader.h"
#include "feeds/fashion_mnist.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/array/reshape.h"
#include "ops/array/transpose.h"
#include "ops/control/loops.h"
#include "ops/math/arg_max.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/ctc_loss.h"
#include "ops/nn/log_softmax.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"
#include "ops/state/initializers.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/adam.h"

namespace ipuflow::examples {
namespace {

constexpr int kItem = 14;  // Side of a downsampled image.
constexpr int kMaxGap = 2;

// A uniform integer in [0, n) that does not depend on the standard
// library's distributions (their algorithms are implementation-defined).
int64_t Uniform(std::mt19937_64& rng, int64_t n) {
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

// The model's variables (see MODEL in the header).
struct CtcModel {
  models::Layer conv[3];
  models::Layer hidden, out;
};

models::Layer CreateConv(const Scope& scope, int64_t in, int64_t out,
                         int64_t seed) {
  models::Layer l;
  l.w = ops::Variable(scope.WithOpName("w"),
                      ops::GlorotUniform(scope, {3, 3, in, out}, seed))
            .handle;
  l.b = ops::Variable(scope.WithOpName("b"), ops::Zeros(scope, {out})).handle;
  return l;
}

CtcModel CreateCtcModel(const Scope& scope, uint64_t seed) {
  const int64_t s = 10 * static_cast<int64_t>(seed);
  CtcModel m;
  m.conv[0] = CreateConv(scope.NewSubScope("conv1"), 1, 16, s + 1);
  m.conv[1] = CreateConv(scope.NewSubScope("conv2"), 16, 32, s + 2);
  m.conv[2] = CreateConv(scope.NewSubScope("conv3"), 32, 32, s + 3);
  m.hidden =
      models::CreateDense(scope.NewSubScope("hidden"), 3 * 32, 64, s + 4);
  m.out =
      models::CreateDense(scope.NewSubScope("logits"), 64, kCtcClasses, s + 5);
  return m;
}

Output ConvRelu(const Scope& s, const models::Layer& l, Output x) {
  Output y = ops::Conv2D(s, x, ops::ReadVariable(s, l.w), {1, 1}, "SAME");
  return ops::Relu(s, ops::BiasAdd(s, y, ops::ReadVariable(s, l.b)));
}

// strips [N,14,64,1] -> log-probabilities [N, T, C] (batch-major).
Output LogProbsBatchMajor(const Scope& s, const CtcModel& m, Output strips) {
  Output x = ConvRelu(s, m.conv[0], strips);
  x = ops::MaxPool2D(s, x, {2, 2}, {2, 2}, "VALID");  // [N,7,32,16]
  x = ConvRelu(s, m.conv[1], x);
  x = ops::MaxPool2D(s, x, {2, 1}, {2, 1}, "VALID");  // [N,3,32,32]
  x = ConvRelu(s, m.conv[2], x);                      // [N,3,32,32]
  x = ops::Transpose(s, x, {0, 2, 1, 3});             // [N,32,3,32]
  x = ops::Reshape(s, x, {-1, 3 * 32});               // [N*32, 96]
  x = models::Dense(s, m.hidden, x, /*relu=*/true);
  x = models::Dense(s, m.out, x, /*relu=*/false);  // [N*32, 11]
  x = ops::LogSoftmax(s, x);
  return ops::Reshape(s, x, {-1, kCtcTimeSteps, kCtcClasses});
}

absl::Status Validate(const CtcOptions& o, int num_ipus) {
  if (num_ipus != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CTC example runs on one IPU; the system has ", num_ipus));
  }
  if (o.batch_size < 1 || o.device_iterations < 1 || o.steps < 1 ||
      o.eval_batch_size < 1 || o.train_sequences < 1 || o.eval_sequences < 1 ||
      o.train_images < 1 || o.test_images < 1) {
    return absl::InvalidArgumentError(
        "steps, device_iterations, batch_size, eval_batch_size, "
        "train_sequences, eval_sequences, train_images and test_images must "
        "be positive");
  }
  if (o.steps % o.device_iterations != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps (", o.steps, ") must be a multiple of ",
                     "device_iterations (", o.device_iterations, ")"));
  }
  if (o.eval_sequences % o.eval_batch_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_batch_size (", o.eval_batch_size,
                     ") must divide eval_sequences (", o.eval_sequences, ")"));
  }
  return absl::OkStatus();
}

double MeanOf(const std::vector<float>& v, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += v[i];
  return end > begin ? sum / (end - begin) : 0;
}

std::string Digits(const std::vector<int>& labels) {
  std::string s;
  for (int l : labels) s += static_cast<char>('0' + l - 1);
  return s.empty() ? "-" : s;
}

}  // namespace

CtcData MakeCtcData(const Tensor& images, const Tensor& labels, int64_t count,
                    uint64_t seed) {
  const int64_t pool = labels.dim(0);
  CtcData d;
  d.strips = Tensor::Filled(DType::kFloat32,
                            {count, kCtcStripHeight, kCtcStripWidth, 1}, 0.0);
  d.targets = Tensor::Filled(DType::kInt32, {count, kCtcMaxItems}, 0.0);
  d.target_lengths = Tensor::Filled(DType::kInt32, {count}, 0.0);
  d.input_lengths = Tensor::Filled(DType::kInt32, {count}, kCtcTimeSteps);
  const float* img = images.data<float>();
  const int32_t* lab = labels.data<int32_t>();
  float* strip = d.strips.data<float>();
  int32_t* targets = d.targets.data<int32_t>();
  std::mt19937_64 rng(seed);
  for (int64_t n = 0; n < count; ++n) {
    const int len = 1 + static_cast<int>(Uniform(rng, kCtcMaxItems));
    int64_t picks[kCtcMaxItems];
    int gaps[kCtcMaxItems] = {0, 0, 0, 0};
    int width = len * kItem;
    for (int i = 0; i < len; ++i) picks[i] = Uniform(rng, pool);
    for (int i = 1; i < len; ++i) {
      gaps[i] = static_cast<int>(Uniform(rng, kMaxGap + 1));
      width += gaps[i];
    }
    int x = static_cast<int>(Uniform(rng, kCtcStripWidth - width + 1));
    float* out = strip + n * kCtcStripHeight * kCtcStripWidth;
    for (int i = 0; i < len; ++i) {
      x += gaps[i];
      const float* src = img + picks[i] * 28 * 28;
      for (int r = 0; r < kItem; ++r) {
        for (int c = 0; c < kItem; ++c) {
          const float* p = src + (2 * r) * 28 + 2 * c;
          out[r * kCtcStripWidth + x + c] =
              0.25f * (p[0] + p[1] + p[28] + p[29]);
        }
      }
      x += kItem;
      targets[n * kCtcMaxItems + i] = lab[picks[i]] + 1;
    }
    d.target_lengths.data<int32_t>()[n] = len;
  }
  return d;
}

std::vector<int> GreedyDecode(const int32_t* best, int64_t time_steps) {
  std::vector<int> out;
  int prev = -1;
  for (int64_t t = 0; t < time_steps; ++t) {
    if (best[t] != prev && best[t] != 0) out.push_back(best[t]);
    prev = best[t];
  }
  return out;
}

int64_t EditDistance(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t up = row[j];
      row[j] = std::min(
          {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

absl::StatusOr<CtcReport> TrainCtcSequences(IPUSystem* system,
                                            const CtcOptions& options,
                                            const CtcStepCallback& on_step) {
  RETURN_IF_ERROR(Validate(options, system->num_ipus()));

  // Data: real Fashion-MNIST in [0, 1] (no normalisation: 0 is background).
  feeds::FashionMnistOptions fm;
  fm.limit = options.train_images;
  ASSIGN_OR_RETURN(feeds::FashionMnistData train_pool,
                   feeds::LoadFashionMnist(feeds::Split::kTrain, fm));
  fm.limit = options.test_images;
  ASSIGN_OR_RETURN(feeds::FashionMnistData test_pool,
                   feeds::LoadFashionMnist(feeds::Split::kTest, fm));
  const CtcData train = MakeCtcData(train_pool.images, train_pool.labels,
                                    options.train_sequences, options.seed);
  const CtcData eval = MakeCtcData(test_pool.images, test_pool.labels,
                                   options.eval_sequences, options.seed + 1);

  // Training feed: the PopTorch-style DataLoader (shuffled, drop_last),
  // micro-batches in infeed order, one pass per epoch, repeated.
  feeds::DataLoaderOptions lo;
  lo.batch_size = options.batch_size;
  lo.device_iterations = options.device_iterations;
  lo.shuffle = true;
  lo.seed = options.seed;
  lo.mode = feeds::DataLoaderMode::kAsync;
  ASSIGN_OR_RETURN(
      std::unique_ptr<feeds::DataLoader> loader,
      feeds::DataLoader::Create(
          feeds::FromTensorSlices({train.strips, train.targets,
                                   train.input_lengths, train.target_lengths}),
          lo));
  ASSIGN_OR_RETURN(feeds::DatasetPtr micro_batches, loader->ToInfeedDataset());
  ASSIGN_OR_RETURN(auto train_feed,
                   feeds::IPUInfeedQueue::Create(micro_batches->Repeat()));
  ASSIGN_OR_RETURN(auto eval_feed, feeds::IPUInfeedQueue::Create(
                                       feeds::FromTensorSlices({eval.strips})
                                           ->Batch(options.eval_batch_size,
                                                   /*drop_remainder=*/true)));
  ASSIGN_OR_RETURN(auto train_out, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(auto eval_out, feeds::IPUOutfeedQueue::Create());

  Scope root = Scope::NewRootScope();
  const CtcModel model = CreateCtcModel(root.NewSubScope("ctc"), options.seed);
  optimizers::AdamOptimizer adam(options.learning_rate);
  ASSIGN_OR_RETURN(
      loops::Loop train_loop,
      loops::Repeat(
          root.NewSubScope("train"), options.device_iterations,
          [&](const Scope& s, const std::vector<Output>& b) {
            Output log_probs = ops::Transpose(
                s, LogProbsBatchMajor(s, model, b[0]), {1, 0, 2});  // [T,N,C]
            Output loss = ops::CTCLoss(s, log_probs, b[1], b[2], b[3]);
            adam.Minimize(s, loss);
            train_out->Enqueue(s, {{"loss", loss}});
            return std::vector<Output>{};
          },
          {}, train_feed.get()));
  const int64_t eval_steps = options.eval_sequences / options.eval_batch_size;
  ASSIGN_OR_RETURN(loops::Loop eval_loop,
                   loops::Repeat(
                       root.NewSubScope("eval"), eval_steps,
                       [&](const Scope& s, const std::vector<Output>& b) {
                         Output best =
                             ops::ArgMax(s, LogProbsBatchMajor(s, model, b[0]),
                                         2, DType::kInt32);  // [N, T]
                         eval_out->Enqueue(s, {{"best", best}});
                         return std::vector<Output>{};
                       },
                       {}, eval_feed.get()));
  RETURN_IF_ERROR(root.status());

  CtcReport report;
  report.steps = options.steps;
  OutfeedMonitor monitor(
      train_out.get(), options.steps, /*replicas=*/1, "loss", "",
      /*window=*/20, [&](int64_t done, int64_t total, float loss, float) {
        report.losses.push_back(loss);
        if (on_step) on_step(done, total, loss);
      });
  IPUStrategy strategy(system);
  absl::Status status = strategy.Initialize(*root.graph());
  const auto start = std::chrono::steady_clock::now();
  const int64_t runs = options.steps / options.device_iterations;
  for (int64_t r = 0; r < runs && status.ok(); ++r) {
    status = strategy.Run(*root.graph(), {}, {train_loop.op}).status();
  }
  const auto end = std::chrono::steady_clock::now();
  monitor.Stop();
  RETURN_IF_ERROR(status);
  report.train_seconds = std::chrono::duration<double>(end - start).count();
  const size_t n = report.losses.size();
  const size_t w = std::min<size_t>(20, n);
  report.initial_loss = MeanOf(report.losses, 0, w);
  report.final_loss = MeanOf(report.losses, n - w, n);

  // Held-out strips: per-step argmax from the device, decoded on the host.
  RETURN_IF_ERROR(strategy.Run(*root.graph(), {}, {eval_loop.op}).status());
  ASSIGN_OR_RETURN(feeds::OutfeedResult out, eval_out->Dequeue());
  ASSIGN_OR_RETURN(Tensor best, out.at("best"));  // [steps, B, T]
  if (best.NumElements() != options.eval_sequences * kCtcTimeSteps) {
    return absl::InternalError(absl::StrCat(
        "evaluation outfeed has ", best.shape().DebugString(), ", expected ",
        eval_steps, " x ", options.eval_batch_size, " x ", kCtcTimeSteps));
  }
  int64_t exact = 0, errors = 0, chars = 0;
  for (int64_t i = 0; i < options.eval_sequences; ++i) {
    const std::vector<int> decoded =
        GreedyDecode(best.data<int32_t>() + i * kCtcTimeSteps, kCtcTimeSteps);
    const int len = eval.target_lengths.data<int32_t>()[i];
    const int32_t* t = eval.targets.data<int32_t>() + i * kCtcMaxItems;
    const std::vector<int> truth(t, t + len);
    exact += decoded == truth;
    errors += EditDistance(decoded, truth);
    chars += len;
    if (i < 8) {
      report.samples.push_back(
          absl::StrCat(Digits(truth), " -> ", Digits(decoded)));
    }
  }
  report.eval_sequences = options.eval_sequences;
  report.sequence_accuracy =
      static_cast<double>(exact) / options.eval_sequences;
  report.character_accuracy =
      std::max(0.0, 1.0 - static_cast<double>(errors) / chars);
  return report;
}

}  // namespace ipuflow::examples
