// A character-level text corpus for language models: the text of Debian's
// `fortunes` package (about 2.6 MB of English, close in size to the 1.1 M
// characters of the tiny-Shakespeare corpus nanoGPT's CPU configuration
// trains on), its byte vocabulary, a split into training and held-out text
// by position, and datasets of random windows of `context + 1` characters,
// each cut into the model's input and its next-character targets.
//
//   ASSIGN_OR_RETURN(feeds::CharCorpus corpus, feeds::LoadCharCorpus({}));
//   feeds::DatasetPtr train =
//       feeds::CharWindows(corpus.train, /*context=*/64, /*seed=*/1)
//           ->Batch(12, /*drop_remainder=*/true)
//           ->Repeat();   // {int32 [12, 64] inputs, int32 [12, 64] targets}
//   std::string text = corpus.Decode(ids);
//
// What is read is hostile input: a file larger than the limit, a text too
// short for one window or a directory without text files is an error
// naming it, never a read past an end.
#ifndef IPUFLOW_FEEDS_CHAR_CORPUS_H_
#define IPUFLOW_FEEDS_CHAR_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/tensor.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds {

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";

struct CharCorpusOptions {
  std::string dir = kFortunesDir;
  // Read at most this many bytes (the files in name order; -1: all). Tests
  // take a slice.
  int64_t max_bytes = -1;
  // The last fraction of the text, by position, is held out.
  double validation_fraction = 0.1;
};

struct CharCorpus {
  // The distinct bytes of the text, ascending: id i is vocab[i].
  std::string vocab;
  Tensor train;       // int32 [n]: ids of the first part of the text.
  Tensor validation;  // int32 [m]: ids of the rest.
  int64_t num_chars = 0;
  std::vector<std::string> files;  // Read, in order.

  int vocab_size() const { return static_cast<int>(vocab.size()); }
  // Ids of `text`'s bytes; InvalidArgument for a byte not in the vocabulary.
  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const;
  // The bytes of `ids`; an id out of range decodes as '?'.
  std::string Decode(absl::Span<const int32_t> ids) const;
};

// Reads every regular file of `options.dir` whose name has no extension
// (the fortunes' text; `.dat` indexes and `.u8` links are skipped), in name
// order. NotFound for a missing directory (install the fortunes package:
// ./bazelw does), InvalidArgument for a directory with no text, a file over
// 64 MiB, a fraction outside (0, 1), or splits too short for a window of
// 2 characters.
absl::StatusOr<CharCorpus> LoadCharCorpus(const CharCorpusOptions& options);

// Windows of `context + 1` consecutive ids of `ids` (int32 [n]) at random
// starts (uniform over [0, n - context - 1], with replacement, a function of
// `seed` and the position in the stream): {inputs int32 [context], targets
// int32 [context]}, targets the inputs shifted by one. Endless; an error
// dataset for context < 1 or a text of fewer than context + 1 ids.
DatasetPtr CharWindows(const Tensor& ids, int64_t context, uint64_t seed);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_CHAR_CORPUS_H_
