// WorkListProgram: items given as data run on their IPUs. A producer on
// IPU 0 multiplies a run input by its constant and pushes the product and
// the input it was fed; a consumer on IPU 1 sums the two popped values
// into one feed, adds a zero-filled feed and pushes the square. Checked by
// hand: the values, the virtual clocks from modelled costs, the bytes
// counted, an epilogue fed its predecessor's fetches, errors naming the
// item and run, and every value found by name or refused naming it.
#include "core/ipu/work_list_program.h"

#include <memory>
#include <vector>

#include "core/ipu/ipu_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/mul.h"

namespace ipuflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ItemValue Value(ItemValue::From from, const std::string& name,
                const std::string& channel = "") {
  return {from, name, channel};
}

class WorkListProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IPUConfig config;
    config.set_auto_select_ipus(2);
    system_ = std::move(IPUSystem::Create(config)).value();
    Scope s = Scope::NewRootScope();
    // produce: y = a * b.
    a_in_ = ops::Placeholder(s, DType::kFloat32, {2});
    b_in_ = ops::Placeholder(s, DType::kFloat32, {2});
    y_ = ops::Mul(s, a_in_, b_in_);
    Add("produce", {{a_in_, b_in_}, {{2}, {2}}, {y_}});
    // consume: z = d * d + e.
    d_ = ops::Placeholder(s, DType::kFloat32, {2});
    e_ = ops::Placeholder(s, DType::kFloat32, {2});
    z_ = ops::Add(s, ops::Mul(s, d_, d_), e_);
    Add("consume", {{d_, e_}, {{2}, {2}}, {z_}});
    // The epilogue: "first" fetches [3, 4]; "second" is fed it.
    Add("first", {{}, {}, {ops::Const<float>(s, {3, 4}, {2})}});
    Output f = ops::Placeholder(s, DType::kFloat32, {2});
    Add("second", {{f}, {{2}}, {ops::Add(s, f, f)}});
    Output g = ops::Placeholder(s, DType::kFloat32, {3});
    Add("wrong second", {{g}, {{3}}, {ops::Add(s, g, g)}});
    graph_ = s.graph_ptr();
  }

  void Add(const std::string& role, ProgramSpec spec) {
    specs_.push_back({role, std::move(spec)});
  }

  SubPrograms& Programs() {
    if (programs_ == nullptr) {
      programs_ = std::make_unique<SubPrograms>(/*fuse=*/true);
      for (auto& [role, spec] : specs_) {
        programs_->Add(role,
                       std::move(Program::Compile(*graph_, spec)).value());
      }
    }
    return *programs_;
  }

  // Two iterations: produce m (IPU 0, cost 1 s) then consume m (IPU 1,
  // cost 2 s), through channel "c", which carries y and the input a by
  // their names; with `out` (one run: nothing pops it), consume pushes its
  // result z to "out".
  std::shared_ptr<WorkListSpec> Spec(int repeats, bool out = false) const {
    using From = ItemValue::From;
    auto spec = std::make_shared<WorkListSpec>();
    spec->name = "frame 'test'";
    spec->lists.assign(2, {});
    spec->iterations = 2;
    spec->repeats = repeats;
    spec->inputs = {"x"};
    spec->programs["produce"] = {{a_in_, b_in_}, {y_}};
    spec->programs["consume"] = {{d_, e_}, {z_}};
    for (int m = 0; m < 2; ++m) {
      WorkListItem p;
      p.ipu = 0;
      p.step = m;
      p.tag = 2 * m;
      p.order = 2 * m;
      p.pushes = {"c"};
      ItemProgram produce;
      produce.role = "produce";
      produce.iteration = m;
      produce.cost = 1;
      produce.label = "produce " + std::to_string(m);
      produce.constants["m"] = Tensor::FromVector<float>({m + 1.0f, m + 1.0f});
      // Listed in another order than the program's feeds.
      produce.feeds = {{b_in_.name(), {Value(From::kConstant, "m")}},
                       {a_in_.name(), {Value(From::kInput, "x")}}};
      ItemPushValues c{
          {Value(From::kFetched, y_.name()), Value(From::kFed, a_in_.name())}};
      c.transfer = ItemPushValues::Transfer::kIpuToIpu;
      c.counted_ipu = 0;
      produce.pushes = {c};
      WorkListItem q;
      q.ipu = 1;
      q.step = m + 1;
      q.tag = 2 * m + 1;
      q.order = 2 * m + 1;
      q.pops = {"c"};
      if (out) q.pushes = {"out"};
      ItemProgram consume;
      consume.role = "consume";
      consume.iteration = m;
      consume.cost = 2;
      consume.label = "consume " + std::to_string(m);
      // The input first: the sum must not be made in its buffer.
      ItemFeed sum{d_.name(),
                   {Value(From::kPopped, a_in_.name(), "c"),
                    Value(From::kPopped, y_.name(), "c")}};
      ItemFeed zeros{e_.name()};
      zeros.zeros_dtype = DType::kFloat32;
      zeros.zeros_shape = TensorShape({2});
      consume.feeds = {sum, zeros};
      if (out) consume.pushes = {{{Value(From::kFetched, z_.name())}}};
      spec->lists[0].push_back(p);
      spec->lists[1].push_back(q);
      spec->items.push_back(produce);
      spec->items.push_back(consume);
    }
    return spec;
  }

  std::unique_ptr<IPUSystem> system_;
  std::shared_ptr<Graph> graph_;
  std::vector<std::pair<std::string, ProgramSpec>> specs_;
  std::unique_ptr<SubPrograms> programs_;
  Output a_in_, b_in_, y_, d_, e_, z_;
  const Tensor a_ = Tensor::FromVector<float>({1, 2});
};

TEST_F(WorkListProgramTest, ItemsLayTheirFeedsOutRunAndPush) {
  auto program = std::move(WorkListProgram::Create(Spec(1, /*out=*/true),
                                                   system_.get(), {}))
                     .value();
  absl::StatusOr<WorkListRecord> record =
      program->Run(Programs(), {a_}, nullptr);
  ASSERT_TRUE(record.ok()) << record.status();
  // Consume m pushes (a (m + 1) + a)^2 + 0.
  Channel* out = program->lists().channel("out");
  ASSERT_EQ(out->size(), 2u);
  EXPECT_THAT(out->Pop()->values[0].span<float>(), ElementsAre(4, 16));
  EXPECT_THAT(out->Pop()->values[0].span<float>(), ElementsAre(9, 36));
  // The sums were made in copies: the values summed are unchanged.
  EXPECT_THAT(a_.span<float>(), ElementsAre(1, 2));
  // Two [2] floats per push, 2 pushes, counted on IPU 0.
  EXPECT_EQ(record->ipu_to_ipu_bytes, 2 * 8 * 2);
  EXPECT_EQ(system_->device(0).counters().ipu_to_ipu.load(), 32);
}

TEST_F(WorkListProgramTest, ClocksFollowTheModelledCosts) {
  auto program =
      std::move(WorkListProgram::Create(Spec(2), system_.get(), {})).value();
  absl::StatusOr<WorkListRecord> record =
      program->Run(Programs(), {a_}, nullptr);
  ASSERT_TRUE(record.ok()) << record.status();
  // IPU 0 at 0-1, 1-2; IPU 1 at 1-3, 3-5; the second run starts when both
  // met at 5.
  EXPECT_THAT(record->vclock, ElementsAre(7, 10));
  ASSERT_EQ(record->timings[1].size(), 4u);
  EXPECT_EQ(record->timings[1][1].start, 3);
  EXPECT_EQ(record->timings[1][2].start, 6);
}

TEST_F(WorkListProgramTest, TheEpilogueIsFedItsPredecessorsFetches) {
  std::shared_ptr<WorkListSpec> spec = Spec(1);
  spec->epilogue = {"first", "second"};
  spec->modelled_costs = true;
  auto program =
      std::move(WorkListProgram::Create(spec, system_.get(), {})).value();
  absl::StatusOr<WorkListRecord> record =
      program->Run(Programs(), {a_}, nullptr);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_THAT(record->vclock, ElementsAre(5, 5));  // Met, no added time.

  spec = Spec(1);
  spec->epilogue = {"first", "wrong second"};
  program = std::move(WorkListProgram::Create(spec, system_.get(), {})).value();
  record = program->Run(Programs(), {a_}, nullptr);
  EXPECT_FALSE(record.ok());
}

TEST_F(WorkListProgramTest, AnItemsErrorNamesItAndTheRun) {
  std::shared_ptr<WorkListSpec> spec = Spec(2);
  // Produce 1 is fed an int32 constant for its float32 placeholder.
  spec->items[2].constants["m"] = Tensor::FromVector<int32_t>({1, 1});
  auto program =
      std::move(WorkListProgram::Create(spec, system_.get(), {})).value();
  absl::StatusOr<WorkListRecord> record =
      program->Run(Programs(), {a_}, nullptr);
  ASSERT_FALSE(record.ok());
  EXPECT_THAT(record.status().message(), HasSubstr("produce 1 of run 0: "));
}

TEST_F(WorkListProgramTest, ProgramsAndInputsAreChecked) {
  // A role the spec describes no program for.
  std::shared_ptr<WorkListSpec> spec = Spec(1);
  spec->items[1].role = "missing";
  EXPECT_THAT(
      WorkListProgram::Create(spec, system_.get(), {}).status().message(),
      HasSubstr("item 'consume 0' runs its missing program, which "
                "the spec does not describe"));

  // A program compiled with other feeds than the spec's signature.
  spec = Spec(1);
  spec->programs["consume"] = {{e_, d_}, {z_}};
  auto program =
      std::move(WorkListProgram::Create(spec, system_.get(), {})).value();
  absl::StatusOr<WorkListRecord> record =
      program->Run(Programs(), {a_}, nullptr);
  EXPECT_EQ(record.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(record.status().message(),
              HasSubstr("frame 'test': its consume program was not compiled"));

  program =
      std::move(WorkListProgram::Create(Spec(1), system_.get(), {})).value();
  record = program->Run(Programs(), {}, nullptr);
  EXPECT_EQ(record.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(record.status().message(),
              HasSubstr("0 argument(s) given for its 1 inputs"));

  // Replica 1 of a 2-IPU spec needs IPUs 2 and 3.
  EXPECT_EQ(WorkListProgram::Create(Spec(1), system_.get(), {1, 2, nullptr})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(WorkListProgramTest, ASpecReferringToWhatDoesNotExistIsRefused) {
  using From = ItemValue::From;
  auto refused = [&](std::shared_ptr<WorkListSpec> spec) {
    return WorkListProgram::Create(spec, system_.get(), {}).status();
  };
  std::shared_ptr<WorkListSpec> spec = Spec(1);
  spec->items[0].pushes.clear();  // Produce 0 pushes to "c".
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'produce 0': 0 push layouts for 1 channels"));

  // Every value is found by name, or its absence is named.
  spec = Spec(1);  // "c" carries y and a, not z.
  spec->items[1].feeds[0].terms[0] = Value(From::kPopped, z_.name(), "c");
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'consume 0': no value '" + z_.name() +
                        "' in channel 'c'"));
  spec = Spec(1);
  spec->items[1].feeds[0].terms[0] = Value(From::kPopped, y_.name(), "out");
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("in channel 'out', which it does not pop"));
  spec = Spec(1);
  spec->items[0].feeds[1].terms[0] = Value(From::kInput, "learning rate");
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'produce 0': no value 'learning rate' in the "
                        "run's inputs"));
  spec = Spec(1);
  spec->items[0].constants.clear();
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("no value 'm' in its constants"));
  spec = Spec(1);  // Produce pushes a fetch its program does not have.
  for (int t : {0, 2}) {
    spec->items[t].pushes[0].values[0] = Value(From::kFetched, z_.name());
  }
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'produce 0': no value '" + z_.name() +
                        "' in its program's fetches"));
  spec = Spec(1);  // A feed cannot be its own run's fetch.
  spec->items[1].feeds[1].terms = {Value(From::kFetched, z_.name())};
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("in its own program's fetches"));

  // Every program feed is filled, each by one item feed of its name.
  spec = Spec(1);
  spec->items[1].feeds.pop_back();
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'consume 0': its consume program's feed '" +
                        e_.name() + "' is given no value"));
  spec = Spec(1);
  spec->items[1].feeds[1].feed = z_.name();
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'consume 0' feeds '" + z_.name() +
                        "', which its consume program does not have"));
  spec = Spec(1);
  spec->items[1].feeds[1].feed = d_.name();
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'consume 0' feeds '" + d_.name() + "' twice"));

  // The pushers of a channel send the same values: produce 1 sends them
  // in another order.
  spec = Spec(1);
  std::swap(spec->items[2].pushes[0].values[0],
            spec->items[2].pushes[0].values[1]);
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'produce 1': pushes [" + a_in_.name() + ", " +
                        y_.name() + "] to 'c', item 'produce 0' pushes [" +
                        y_.name() + ", " + a_in_.name() + "]"));

  // Nothing pops "out": it would fill up on the second run.
  EXPECT_THAT(refused(Spec(2, /*out=*/true)).message(),
              HasSubstr("channel 'out' is pushed and popped a different"));

  spec = Spec(1);
  spec->items[3].iteration = 2;  // Of 2 iterations.
  EXPECT_THAT(refused(spec).message(),
              HasSubstr("item 'consume 1': iteration"));

  spec = Spec(1);
  spec->lists[1].pop_back();  // Consume 1 is on no list.
  EXPECT_THAT(refused(spec).message(), HasSubstr("'consume 1' is on no IPU"));
}

}  // namespace
}  // namespace ipuflow
