// The character corpus: the fortunes package's text (installed by
// ./bazelw), its vocabulary and split, random windows whose targets are
// the inputs shifted by one, and what is refused.
#include "feeds/char_corpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

std::filesystem::path TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir =
      std::filesystem::path(base != nullptr ? base : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(CharCorpusTest, ReadsTheFortunesSplitByPosition) {
  CharCorpusOptions options;
  options.max_bytes = 200000;
  absl::StatusOr<CharCorpus> corpus = LoadCharCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->num_chars, 200000);
  EXPECT_EQ(corpus->train.NumElements(), 180000);
  EXPECT_EQ(corpus->validation.NumElements(), 20000);
  // English text: letters, digits, punctuation, newlines; ascending, once.
  EXPECT_GT(corpus->vocab_size(), 60);
  EXPECT_LT(corpus->vocab_size(), 200);
  EXPECT_TRUE(std::is_sorted(
      corpus->vocab.begin(), corpus->vocab.end(), [](char a, char b) {
        return static_cast<unsigned char>(a) < static_cast<unsigned char>(b);
      }));
  EXPECT_EQ(std::set<char>(corpus->vocab.begin(), corpus->vocab.end()).size(),
            corpus->vocab.size());
  EXPECT_NE(corpus->vocab.find('\n'), std::string::npos);
  EXPECT_EQ(corpus->files.front(), std::string(kFortunesDir) + "/art");
  // The ids decode to the files' text, and encode back.
  std::ifstream art(corpus->files.front(), std::ios::binary);
  std::string head(100, '\0');
  art.read(head.data(), 100);
  const std::string decoded =
      corpus->Decode(corpus->train.span<int32_t>().subspan(0, 100));
  EXPECT_EQ(decoded, head);
  absl::StatusOr<std::vector<int32_t>> ids = corpus->Encode(head);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(corpus->Decode(*ids), head);
  EXPECT_FALSE(corpus->Encode(std::string(1, '\x01')).ok());
}

TEST(CharCorpusTest, WindowsAreShiftedByOneAndAFunctionOfTheSeed) {
  Tensor ids(DType::kInt32, TensorShape({50}));
  for (int i = 0; i < 50; ++i) ids.data<int32_t>()[i] = i;
  absl::StatusOr<std::vector<Element>> a =
      Collect(CharWindows(ids, 8, /*seed=*/3), 40);
  absl::StatusOr<std::vector<Element>> b =
      Collect(CharWindows(ids, 8, /*seed=*/3), 40);
  absl::StatusOr<std::vector<Element>> c =
      Collect(CharWindows(ids, 8, /*seed=*/4), 40);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::set<int32_t> starts;
  int same_as_other_seed = 0;
  for (size_t k = 0; k < a->size(); ++k) {
    const auto x = (*a)[k][0].span<int32_t>();
    const auto y = (*a)[k][1].span<int32_t>();
    ASSERT_EQ(x.size(), 8u);
    // Consecutive ids inside the text: start in [0, 50 - 9].
    EXPECT_GE(x[0], 0);
    EXPECT_LE(x[0], 41);
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(x[t], x[0] + t);
      EXPECT_EQ(y[t], x[t] + 1);
    }
    starts.insert(x[0]);
    EXPECT_EQ((*b)[k][0].span<int32_t>()[0], x[0]);
    same_as_other_seed += (*c)[k][0].span<int32_t>()[0] == x[0];
  }
  EXPECT_GT(starts.size(), 20u);  // 40 draws over 42 starts.
  EXPECT_LT(same_as_other_seed, 10);
}

TEST(CharCorpusTest, SkipsIndexesAndLinksAndRefusesWhatCannotWork) {
  const std::filesystem::path dir = TempDir("corpus");
  Write(dir / "b", "hello ");
  Write(dir / "a", "world, ");
  Write(dir / "a.dat", std::string(10, '\x07'));
  std::filesystem::create_symlink(dir / "a", dir / "a.u8");
  std::filesystem::create_symlink(dir / "a", dir / "c");
  CharCorpusOptions options;
  options.dir = dir.string();
  options.validation_fraction = 0.25;
  absl::StatusOr<CharCorpus> corpus = LoadCharCorpus(options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->num_chars, 13);  // "world, hello "
  EXPECT_EQ(corpus->Decode(corpus->train.span<int32_t>()), "world, he");
  EXPECT_EQ(corpus->Decode(corpus->validation.span<int32_t>()), "llo ");
  EXPECT_EQ(corpus->vocab, " ,dehlorw");

  options.validation_fraction = 1.0;
  EXPECT_EQ(LoadCharCorpus(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.validation_fraction = 0.05;  // Leaves 1 character held out.
  EXPECT_EQ(LoadCharCorpus(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.dir = (dir / "missing").string();
  EXPECT_EQ(LoadCharCorpus(options).status().code(),
            absl::StatusCode::kNotFound);
  const std::filesystem::path empty = TempDir("empty");
  Write(empty / "only.dat", "x");
  options.dir = empty.string();
  EXPECT_EQ(LoadCharCorpus(options).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_FALSE(CharWindows(corpus->train, 9, 0)->ok());  // 9 ids only.
  EXPECT_TRUE(CharWindows(corpus->train, 8, 0)->ok());
  EXPECT_FALSE(CharWindows(corpus->train, 0, 0)->ok());
  EXPECT_FALSE(
      CharWindows(Tensor(DType::kFloat32, TensorShape({9})), 2, 0)->ok());
}

}  // namespace
}  // namespace ipuflow::feeds
