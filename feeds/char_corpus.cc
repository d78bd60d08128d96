#include "feeds/char_corpus.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace ipuflow::feeds {
namespace {

constexpr int64_t kMaxFileBytes = int64_t{64} << 20;

absl::StatusOr<std::string> ReadText(const std::filesystem::path& path,
                                     int64_t limit) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat(
        "char corpus: cannot size '", path.string(), "': ", ec.message()));
  }
  if (size > static_cast<uintmax_t>(kMaxFileBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("char corpus: '", path.string(), "' has ", size,
                     " bytes, more than the ", kMaxFileBytes, " allowed"));
  }
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(size), limit);
  std::string text(static_cast<size_t>(n), '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(text.data(), n)) {
    return absl::DataLossError(absl::StrCat("char corpus: could not read ", n,
                                            " bytes of '", path.string(), "'"));
  }
  return text;
}

Tensor Ids(const std::string& text, const std::array<int32_t, 256>& id_of,
           size_t begin, size_t end) {
  Tensor t(DType::kInt32, TensorShape({static_cast<int64_t>(end - begin)}));
  int32_t* out = t.data<int32_t>();
  for (size_t i = begin; i < end; ++i) {
    out[i - begin] = id_of[static_cast<unsigned char>(text[i])];
  }
  return t;
}

// A well-mixed 64-bit function of (seed, index): SplitMix64's finaliser.
uint64_t Mix(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> CharCorpus::Encode(
    const std::string& text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) {
    const size_t at = vocab.find(c);
    if (at == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("char corpus: byte ", static_cast<unsigned char>(c),
                       " is not in the corpus' vocabulary"));
    }
    ids.push_back(static_cast<int32_t>(at));
  }
  return ids;
}

std::string CharCorpus::Decode(absl::Span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    text.push_back(id >= 0 && id < vocab_size() ? vocab[id] : '?');
  }
  return text;
}

absl::StatusOr<CharCorpus> LoadCharCorpus(const CharCorpusOptions& options) {
  if (!(options.validation_fraction > 0 && options.validation_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("char corpus: validation_fraction ",
                     options.validation_fraction, " is not in (0, 1)"));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(options.dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("char corpus: no directory '", options.dir,
                     "' (install Debian's fortunes package; ./bazelw does)"));
  }
  std::vector<std::filesystem::path> paths;
  for (const auto& entry :
       std::filesystem::directory_iterator(options.dir, ec)) {
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
    if (entry.path().has_extension()) continue;
    paths.push_back(entry.path());
  }
  if (ec) {
    return absl::NotFoundError(absl::StrCat("char corpus: cannot list '",
                                            options.dir, "': ", ec.message()));
  }
  std::sort(paths.begin(), paths.end());
  CharCorpus corpus;
  std::string text;
  const int64_t budget = options.max_bytes < 0
                             ? std::numeric_limits<int64_t>::max()
                             : options.max_bytes;
  for (const auto& path : paths) {
    const int64_t left = budget - static_cast<int64_t>(text.size());
    if (left <= 0) break;
    ASSIGN_OR_RETURN(std::string part, ReadText(path, left));
    text += part;
    corpus.files.push_back(path.string());
  }
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("char corpus: '", options.dir,
                     "' holds no text (files without an "
                     "extension)"));
  }
  std::array<bool, 256> seen{};
  for (char c : text) seen[static_cast<unsigned char>(c)] = true;
  std::array<int32_t, 256> id_of{};
  for (int b = 0; b < 256; ++b) {
    if (!seen[b]) continue;
    id_of[b] = static_cast<int32_t>(corpus.vocab.size());
    corpus.vocab.push_back(static_cast<char>(b));
  }
  const size_t split = static_cast<size_t>(static_cast<double>(text.size()) *
                                           (1 - options.validation_fraction));
  if (split < 2 || text.size() - split < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("char corpus: ", text.size(), " characters split at ",
                     split, " leave a part shorter than one window of 2"));
  }
  corpus.num_chars = static_cast<int64_t>(text.size());
  corpus.train = Ids(text, id_of, 0, split);
  corpus.validation = Ids(text, id_of, split, text.size());
  return corpus;
}

DatasetPtr CharWindows(const Tensor& ids, int64_t context, uint64_t seed) {
  if (ids.dtype() != DType::kInt32 || ids.rank() != 1) {
    return ErrorDataset(
        absl::InvalidArgumentError("CharWindows: ids must be an int32 vector"));
  }
  const int64_t n = ids.NumElements();
  if (context < 1 || context > n - 1) {
    return ErrorDataset(absl::InvalidArgumentError(
        absl::StrCat("CharWindows: context ", context, " needs at least ",
                     context + 1, " ids; the text has ", n)));
  }
  const uint64_t starts = static_cast<uint64_t>(n - context);
  ElementSpec spec{{DType::kInt32, DType::kInt32},
                   {TensorShape({context}), TensorShape({context})}};
  MapFn cut = [ids, context, seed,
               starts](Element index) -> absl::StatusOr<Element> {
    const uint64_t i = static_cast<uint64_t>(index[0].scalar<int64_t>());
    const int64_t start = static_cast<int64_t>(Mix(seed, i) % starts);
    Tensor x(DType::kInt32, TensorShape({context}));
    Tensor y(DType::kInt32, TensorShape({context}));
    const int32_t* src = ids.data<int32_t>() + start;
    std::copy(src, src + context, x.data<int32_t>());
    std::copy(src + 1, src + 1 + context, y.data<int32_t>());
    return Element{std::move(x), std::move(y)};
  };
  return Range(0, std::numeric_limits<int64_t>::max())
      ->Map(std::move(cut), /*num_parallel_calls=*/1, spec);
}

}  // namespace ipuflow::feeds
