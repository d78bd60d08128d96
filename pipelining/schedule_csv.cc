#include "pipelining/schedule_csv.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status.h"
#include "pipelining/schedule_internal.h"

namespace ipuflow::pipelining {
namespace {

constexpr size_t kMaxCellChars = 32;
constexpr size_t kMaxListedCsvErrors = 50;
constexpr int kMaxDigits = 9;  // Below 2^31: no overflow while parsing.

enum class Type { kF, kB, kSendF, kRecvF, kSendB, kRecvB };

const char* TypeName(Type type) {
  switch (type) {
    case Type::kF:
      return "F";
    case Type::kB:
      return "B";
    case Type::kSendF:
      return "SEND_F";
    case Type::kRecvF:
      return "RECV_F";
    case Type::kSendB:
      return "SEND_B";
    case Type::kRecvB:
      return "RECV_B";
  }
  return "?";
}

bool IsCompute(Type type) { return type == Type::kF || type == Type::kB; }

struct Action {
  int stage = 0;
  Type type = Type::kF;
  int micro_batch = 0;
  int column = 0;
};

std::string ActionName(const Action& a) {
  return absl::StrCat(a.stage, TypeName(a.type), a.micro_batch);
}

// Every error of one read, each with its place; the first kMaxListedCsvErrors
// are kept.
class CsvErrors {
 public:
  void Add(int row, int column, const std::string& cell,
           const std::string& what) {
    Add(absl::StrFormat("row %d, column %d ('%s'): %s", row, column, cell,
                        what));
  }
  void Add(std::string line) {
    ++count_;
    if (lines_.size() < kMaxListedCsvErrors) lines_.push_back(std::move(line));
  }
  bool empty() const { return count_ == 0; }
  // False once kMaxListedCsvErrors are kept: callers then count an error with
  // Skip() instead of formatting it (a hostile file can have millions).
  bool listing() const { return lines_.size() < kMaxListedCsvErrors; }
  void Skip() { ++count_; }
  absl::Status status() const {
    if (count_ == 0) return absl::OkStatus();
    std::string more;
    if (count_ > static_cast<int64_t>(lines_.size())) {
      more = absl::StrCat("\n  ... and ", count_ - lines_.size(), " more");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("schedule CSV: ", count_, " error(s):\n  ",
                     absl::StrJoin(lines_, "\n  "), more));
  }

 private:
  std::vector<std::string> lines_;
  int64_t count_ = 0;
};

// A cell as messages show it: escaped, at most kMaxCellChars characters.
std::string Shown(absl::string_view cell) {
  if (cell.size() <= kMaxCellChars) return absl::CHexEscape(cell);
  return absl::StrCat(absl::CHexEscape(cell.substr(0, kMaxCellChars)), "...");
}

// Digits at `pos` (advanced past them); -1 if there are none, -2 if more
// than kMaxDigits.
int64_t Number(absl::string_view cell, size_t* pos) {
  const size_t start = *pos;
  int64_t value = 0;
  while (*pos < cell.size() && absl::ascii_isdigit(cell[*pos])) {
    if (*pos - start < kMaxDigits) value = 10 * value + (cell[*pos] - '0');
    ++*pos;
  }
  if (*pos == start) return -1;
  return *pos - start > kMaxDigits ? -2 : value;
}

// One non-empty cell; false (with an error) if it is not a supported action.
bool ParseAction(absl::string_view cell, int row, Action* action,
                 CsvErrors& errors) {
  const std::string shown = Shown(cell);
  auto fail = [&](const std::string& what) {
    errors.Add(row, action->column, shown, what);
    return false;
  };
  const char* form =
      "an action is [stage][F|B|SEND_F|RECV_F|SEND_B|RECV_B][micro-batch], "
      "e.g. 2F0";
  if (cell.size() > kMaxCellChars) {
    return fail(absl::StrCat("a cell of ", cell.size(),
                             " characters is not an action (at most ",
                             kMaxCellChars, "); ", form));
  }
  size_t pos = 0;
  const int64_t stage = Number(cell, &pos);
  const size_t token_start = pos;
  while (pos < cell.size() &&
         (absl::ascii_isupper(cell[pos]) || cell[pos] == '_')) {
    ++pos;
  }
  const absl::string_view token = cell.substr(token_start, pos - token_start);
  const int64_t micro_batch = Number(cell, &pos);
  if (stage == -1 || token.empty() || pos != cell.size()) {
    return fail(absl::StrCat("not an action: ", form));
  }
  static const std::pair<const char*, Type> kTypes[] = {
      {"F", Type::kF},          {"B", Type::kB},
      {"SEND_F", Type::kSendF}, {"RECV_F", Type::kRecvF},
      {"SEND_B", Type::kSendB}, {"RECV_B", Type::kRecvB}};
  const auto* type =
      std::find_if(std::begin(kTypes), std::end(kTypes),
                   [&](const auto& t) { return token == t.first; });
  if (type == std::end(kTypes)) {
    if (token == "I" || token == "W") {
      return fail(absl::StrFormat(
          "action %s (backward %s) is the split backward of the zero-bubble "
          "schedules, not supported yet: use B, the full backward",
          token, token == "I" ? "input" : "weight"));
    }
    if (token == "UNSHARD" || token == "RESHARD" || token == "REDUCE_GRAD") {
      return fail(absl::StrFormat(
          "action %s is torch's FSDP / gradient-reduction action, not "
          "supported: ipuflow's pipeline reduces gradients itself",
          token));
    }
    return fail(absl::StrFormat("unknown action %s: %s", Shown(token), form));
  }
  if (stage == -2 || stage >= kMaxScheduleItems) {
    return fail(absl::StrFormat("the stage number is larger than %d",
                                kMaxScheduleItems - 1));
  }
  if (micro_batch == -1) {
    return fail(absl::StrCat("action ", type->first,
                             " needs a micro-batch number; ", form));
  }
  if (micro_batch == -2 || micro_batch >= kMaxScheduleItems) {
    return fail(absl::StrFormat("the micro-batch number is larger than %d",
                                kMaxScheduleItems - 1));
  }
  action->stage = static_cast<int>(stage);
  action->type = type->second;
  action->micro_batch = static_cast<int>(micro_batch);
  return true;
}

// The rows' actions; idle cells are dropped (their columns are kept in
// Action::column).
std::vector<std::vector<Action>> ParseRows(absl::string_view csv,
                                           CsvErrors& errors) {
  // Rows counted before they are split: a file of newlines stays cheap.
  int64_t num_lines = std::count(csv.begin(), csv.end(), '\n');
  if (!csv.empty() && csv.back() != '\n') ++num_lines;
  if (num_lines > kMaxPipelineIpus) {
    errors.Add(absl::StrFormat("%d rows; a row is an IPU, at most %d",
                               num_lines, kMaxPipelineIpus));
    return {};
  }
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<std::vector<Action>> rows(lines.size());
  for (size_t r = 0; r < lines.size(); ++r) {
    absl::string_view line = lines[r];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    int column = 0;
    for (absl::string_view cell : absl::StrSplit(line, ',')) {
      cell = absl::StripAsciiWhitespace(cell);
      Action action;
      action.column = column++;
      if (cell.empty()) continue;
      if (ParseAction(cell, static_cast<int>(r), &action, errors)) {
        rows[r].push_back(action);
      }
    }
  }
  return rows;
}

// The pipeline the actions describe, and where each action is.
struct Layout {
  int num_stages = 0;
  int micro_batches = 0;
  bool training = false;
  bool has_comms = false;
  std::vector<int> stage_row;
  // Dense compute item index -> {row, column}; {-1, -1} if absent.
  std::vector<std::pair<int, int>> compute_at;
  // Communication action key -> {row, column}.
  absl::flat_hash_map<int64_t, std::pair<int, int>> comm_at;

  int64_t CommKey(Type type, int stage, int micro_batch) const {
    return (static_cast<int64_t>(type) * num_stages + stage) * micro_batches +
           micro_batch;
  }
  std::string CommName(int64_t key) const {
    const int m = static_cast<int>(key % micro_batches);
    const int stage = static_cast<int>((key / micro_batches) % num_stages);
    const Type type = static_cast<Type>(key / micro_batches / num_stages);
    return absl::StrCat(stage, TypeName(type), m);
  }
  int ComputeIndex(const Action& a) const {
    return internal::ItemIndex(
        {a.stage, a.type == Type::kF ? Pass::kForward : Pass::kBackward,
         a.micro_batch},
        num_stages, micro_batches);
  }
};

// Infers the pipeline, places every stage on one row, and finds duplicates.
bool LayOut(const std::vector<std::vector<Action>>& rows, Layout& l,
            CsvErrors& errors) {
  int64_t max_stage = -1, max_mb = -1;
  for (const auto& row : rows) {
    for (const Action& a : row) {
      if (!IsCompute(a.type)) {
        l.has_comms = true;
        continue;
      }
      max_stage = std::max<int64_t>(max_stage, a.stage);
      max_mb = std::max<int64_t>(max_mb, a.micro_batch);
      l.training |= a.type == Type::kB;
    }
  }
  if (max_stage < 0) {
    errors.Add("no F or B action: an empty schedule");
    return false;
  }
  const int64_t items = (l.training ? 2 : 1) * (max_stage + 1) * (max_mb + 1);
  if (items > kMaxScheduleItems) {
    errors.Add(absl::StrFormat(
        "%d stages x %d micro-batches%s = %d items; the limit is %d",
        max_stage + 1, max_mb + 1, l.training ? " x 2 passes" : "", items,
        kMaxScheduleItems));
    return false;
  }
  l.num_stages = static_cast<int>(max_stage + 1);
  l.micro_batches = static_cast<int>(max_mb + 1);
  l.stage_row.assign(l.num_stages, -1);
  l.compute_at.assign(2 * l.num_stages * l.micro_batches, {-1, -1});
  // A stage's row is the first row with one of its compute actions.
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    for (const Action& a : rows[r]) {
      if (IsCompute(a.type) && l.stage_row[a.stage] < 0) {
        l.stage_row[a.stage] = r;
      }
    }
  }
  absl::flat_hash_set<std::pair<int, int>> reported;  // {stage, row}
  std::vector<int> last_mb(2 * l.num_stages, -1);     // Per stage and pass.
  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    for (const Action& a : rows[r]) {
      if (a.stage >= l.num_stages || a.micro_batch >= l.micro_batches) {
        errors.Add(r, a.column, ActionName(a),
                   absl::StrFormat("no compute action has stage %d or "
                                   "micro-batch %d (stages 0 to %d, "
                                   "micro-batches 0 to %d)",
                                   a.stage, a.micro_batch, l.num_stages - 1,
                                   l.micro_batches - 1));
        continue;
      }
      const int row_of = l.stage_row[a.stage];
      if (row_of < 0) continue;  // Reported below.
      if (row_of != r && !IsCompute(a.type)) {
        errors.Add(r, a.column, ActionName(a),
                   absl::StrFormat("a send or receive of stage %d on row %d; "
                                   "stage %d runs on row %d",
                                   a.stage, r, a.stage, row_of));
        continue;
      }
      if (row_of != r) {
        if (reported.insert({a.stage, r}).second) {
          errors.Add(r, a.column, ActionName(a),
                     absl::StrFormat("stage %d is on two IPUs, rows %d and "
                                     "%d: a stage runs on one IPU",
                                     a.stage, row_of, r));
        }
        continue;
      }
      std::pair<int, int>* at;
      if (IsCompute(a.type)) {
        at = &l.compute_at[l.ComputeIndex(a)];
      } else {
        at = &l.comm_at
                  .try_emplace(l.CommKey(a.type, a.stage, a.micro_batch),
                               std::make_pair(-1, -1))
                  .first->second;
      }
      if (at->first >= 0) {
        errors.Add(r, a.column, ActionName(a),
                   absl::StrFormat("listed twice (also row %d, column %d)",
                                   at->first, at->second));
        continue;
      }
      *at = {r, a.column};
      if (IsCompute(a.type)) {
        int& last = last_mb[2 * a.stage + (a.type == Type::kF ? 0 : 1)];
        if (a.micro_batch < last) {
          errors.Add(r, a.column, ActionName(a),
                     absl::StrFormat("comes after micro-batch %d of its stage "
                                     "and pass: a stage runs its "
                                     "micro-batches in ascending order (its "
                                     "stash and the channels between IPUs "
                                     "are FIFOs)",
                                     last));
        }
        last = std::max(last, a.micro_batch);
      }
    }
  }
  for (int s = 0; s < l.num_stages; ++s) {
    if (l.stage_row[s] < 0 && !errors.listing()) {
      errors.Skip();
    } else if (l.stage_row[s] < 0) {
      errors.Add(absl::StrFormat(
          "stage %d has no F or B action on any row (stages 0 to %d appear)", s,
          l.num_stages - 1));
    }
  }
  return errors.empty();
}

void CheckMissing(const Layout& l, CsvErrors& errors) {
  for (int m = 0; m < l.micro_batches; ++m) {
    for (const WorkItem& item :
         internal::MicroBatchItems(l.num_stages, m, l.training)) {
      if (l.compute_at[internal::ItemIndex(item, l.num_stages, l.micro_batches)]
              .first >= 0) {
        continue;
      }
      if (!errors.listing()) {
        errors.Skip();
      } else {
        errors.Add(absl::StrFormat(
            "%d%s%d is missing: no row runs it (row %d has stage %d)",
            item.stage, PassLetter(item.pass), m, l.stage_row[item.stage],
            item.stage));
      }
    }
  }
}

struct Exchange {
  Type send, recv;
  int from, to;  // Stages.
  Pass after, before;
};

// The exchanges of micro-batch m between stages s and s+1 (and back).
std::vector<Exchange> Exchanges(const Layout& l, int s) {
  std::vector<Exchange> out = {
      {Type::kSendF, Type::kRecvF, s, s + 1, Pass::kForward, Pass::kForward}};
  if (l.training) {
    out.push_back({Type::kSendB, Type::kRecvB, s + 1, s, Pass::kBackward,
                   Pass::kBackward});
  }
  return out;
}

// The compute+communication form: every send and receive matched, in
// order, and present for every exchange between two IPUs.
void CheckComms(const Layout& l, CsvErrors& errors) {
  auto column_of = [&](int stage, Pass pass, int m) {
    return l
        .compute_at[internal::ItemIndex({stage, pass, m}, l.num_stages,
                                        l.micro_batches)]
        .second;
  };
  for (int s = 0; s + 1 < l.num_stages; ++s) {
    for (const Exchange& x : Exchanges(l, s)) {
      for (int m = 0; m < l.micro_batches; ++m) {
        const int64_t send = l.CommKey(x.send, x.from, m);
        const int64_t recv = l.CommKey(x.recv, x.to, m);
        auto s_it = l.comm_at.find(send), r_it = l.comm_at.find(recv);
        const std::string send_name = absl::StrCat(x.from, TypeName(x.send), m);
        const std::string recv_name = absl::StrCat(x.to, TypeName(x.recv), m);
        const bool cross = l.stage_row[x.from] != l.stage_row[x.to];
        const bool has_send = s_it != l.comm_at.end();
        const bool has_recv = r_it != l.comm_at.end();
        const std::string rows_text =
            absl::StrFormat("stage %d is on row %d, stage %d on row %d", x.from,
                            l.stage_row[x.from], x.to, l.stage_row[x.to]);
        if (has_send && !has_recv) {
          errors.Add(s_it->second.first, s_it->second.second, send_name,
                     absl::StrFormat("unmatched send: no row has %s (%s)",
                                     recv_name, rows_text));
        } else if (has_recv && !has_send) {
          errors.Add(r_it->second.first, r_it->second.second, recv_name,
                     absl::StrFormat("unmatched receive: no row has %s (%s)",
                                     send_name, rows_text));
        } else if (!has_send && cross && !errors.listing()) {
          errors.Skip();
        } else if (!has_send && cross) {
          errors.Add(absl::StrFormat(
              "%s and %s are missing: %s, and the compute+communication form "
              "lists every exchange between two IPUs",
              send_name, recv_name, rows_text));
        }
        // A send after the action whose result it sends, a receive before
        // the action that needs it.
        const int produced = column_of(x.from, x.after, m);
        const int needed = column_of(x.to, x.before, m);
        if (s_it != l.comm_at.end() && s_it->second.second < produced) {
          errors.Add(s_it->second.first, s_it->second.second, send_name,
                     absl::StrFormat("sends before %d%s%d (column %d) has run",
                                     x.from, PassLetter(x.after), m, produced));
        }
        if (r_it != l.comm_at.end() && needed >= 0 &&
            r_it->second.second > needed) {
          errors.Add(r_it->second.first, r_it->second.second, recv_name,
                     absl::StrFormat("receives after %d%s%d (column %d), "
                                     "which needs it",
                                     x.to, PassLetter(x.before), m, needed));
        }
      }
    }
  }
  // Sends and receives of a stage that has no such partner.
  for (const auto& [key, at] : l.comm_at) {
    const int stage = static_cast<int>((key / l.micro_batches) % l.num_stages);
    const Type type = static_cast<Type>(key / l.micro_batches / l.num_stages);
    const bool to_next = type == Type::kSendF || type == Type::kRecvB;
    if (to_next ? stage + 1 < l.num_stages : stage > 0) continue;
    errors.Add(at.first, at.second, l.CommName(key),
               "a send or receive with no partner stage (the first stage "
               "receives no activations and sends no gradient; the last "
               "sends no activations and receives no gradient)");
  }
}

// Runs the rows without timing: a compute action when its dependencies have
// run, a send at once (torch's isend), a receive when its send has run.
// Events are compute items (their dense index) and sends (sends_base_ +
// CommKey).
class RowRunner {
 public:
  RowRunner(const std::vector<std::vector<Action>>& rows, const Layout& l)
      : rows_(rows),
        l_(l),
        sends_base_(int64_t{2} * l.num_stages * l.micro_batches),
        compute_done_(sends_base_, 0),
        cursor_(rows.size(), 0) {}

  // Runs every row as far as it goes.
  void Run() {
    std::deque<int> runnable;
    for (int r = 0; r < static_cast<int>(rows_.size()); ++r) {
      runnable.push_back(r);
    }
    while (!runnable.empty()) {
      const int r = runnable.front();
      runnable.pop_front();
      while (cursor_[r] < rows_[r].size()) {
        const Action& a = rows_[r][cursor_[r]];
        const int64_t wait = Awaited(a);
        if (wait >= 0) {
          waiters_[wait].push_back(r);
          break;
        }
        const int64_t event = Done(a);
        ++cursor_[r];
        auto it = waiters_.find(event);
        if (it != waiters_.end()) {
          runnable.insert(runnable.end(), it->second.begin(), it->second.end());
          waiters_.erase(it);
        }
      }
    }
  }

  // Every row that could not finish, at its stuck action.
  void Report(CsvErrors& errors) const {
    for (int r = 0; r < static_cast<int>(rows_.size()); ++r) {
      if (cursor_[r] == rows_[r].size()) continue;
      const Action& a = rows_[r][cursor_[r]];
      errors.Add(r, a.column, ActionName(a),
                 absl::StrCat("deadlock: waits for ", EventName(Awaited(a)),
                              ", which never runs"));
    }
  }

 private:
  // The event `a` waits for, or -1.
  int64_t Awaited(const Action& a) const {
    if (IsCompute(a.type)) {
      const WorkItem item{a.stage,
                          a.type == Type::kF ? Pass::kForward : Pass::kBackward,
                          a.micro_batch};
      for (const WorkItem& d : internal::Dependencies(item, l_.num_stages)) {
        const int i = internal::ItemIndex(d, l_.num_stages, l_.micro_batches);
        if (!compute_done_[i]) return i;
      }
      return -1;
    }
    if (a.type == Type::kRecvF || a.type == Type::kRecvB) {
      const bool fwd = a.type == Type::kRecvF;
      const int64_t key =
          sends_base_ + l_.CommKey(fwd ? Type::kSendF : Type::kSendB,
                                   a.stage + (fwd ? -1 : 1), a.micro_batch);
      return sent_.contains(key) ? -1 : key;
    }
    return -1;
  }

  // Marks `a` done; returns its event (-1 for a receive).
  int64_t Done(const Action& a) {
    if (IsCompute(a.type)) {
      const int index = l_.ComputeIndex(a);
      compute_done_[index] = 1;
      return index;
    }
    if (a.type == Type::kSendF || a.type == Type::kSendB) {
      const int64_t event =
          sends_base_ + l_.CommKey(a.type, a.stage, a.micro_batch);
      sent_.insert(event);
      return event;
    }
    return -1;
  }

  // "1B0 (row 1, column 3)".
  std::string EventName(int64_t event) const {
    std::string name;
    std::pair<int, int> at;
    if (event < sends_base_) {
      const int stage =
          static_cast<int>((event / l_.micro_batches) % l_.num_stages);
      const bool fwd = event < int64_t{l_.num_stages} * l_.micro_batches;
      name = absl::StrCat(stage, fwd ? "F" : "B", event % l_.micro_batches);
      at = l_.compute_at[event];
    } else {
      name = l_.CommName(event - sends_base_);
      at = l_.comm_at.at(event - sends_base_);
    }
    return absl::StrFormat("%s (row %d, column %d)", name, at.first, at.second);
  }

  const std::vector<std::vector<Action>>& rows_;
  const Layout& l_;
  const int64_t sends_base_;
  std::vector<char> compute_done_;
  absl::flat_hash_set<int64_t> sent_;
  absl::flat_hash_map<int64_t, std::vector<int>> waiters_;
  std::vector<size_t> cursor_;
};

}  // namespace

std::string ScheduleTableToCsv(const ScheduleTable& table) {
  std::vector<std::vector<std::string>> rows(table.num_ipus);
  std::vector<std::vector<std::string>> cells(table.num_ipus);
  for (const std::vector<WorkItem>& step : table.steps) {
    for (auto& c : cells) c.clear();
    size_t width = 1;
    for (const WorkItem& item : step) {
      std::vector<std::string>& c = cells[table.ipu_of(item)];
      c.push_back(
          absl::StrCat(item.stage, PassLetter(item.pass), item.micro_batch));
      width = std::max(width, c.size());
    }
    for (int ipu = 0; ipu < table.num_ipus; ++ipu) {
      cells[ipu].resize(width);
      rows[ipu].insert(rows[ipu].end(), cells[ipu].begin(), cells[ipu].end());
    }
  }
  std::string out;
  for (const std::vector<std::string>& row : rows) {
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\n");
  }
  return out;
}

absl::StatusOr<ScheduleTable> ScheduleTableFromCsv(absl::string_view csv) {
  CsvErrors errors;
  if (static_cast<int64_t>(csv.size()) > kMaxScheduleCsvBytes) {
    errors.Add(absl::StrFormat("%d bytes; the limit is %d", csv.size(),
                               kMaxScheduleCsvBytes));
    return errors.status();
  }
  const std::vector<std::vector<Action>> rows = ParseRows(csv, errors);
  RETURN_IF_ERROR(errors.status());
  Layout l;
  if (!LayOut(rows, l, errors)) return errors.status();
  CheckMissing(l, errors);
  if (l.has_comms) CheckComms(l, errors);
  RETURN_IF_ERROR(errors.status());
  RowRunner runner(rows, l);
  runner.Run();
  runner.Report(errors);
  RETURN_IF_ERROR(errors.status());
  std::vector<std::vector<WorkItem>> orders(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const Action& a : rows[r]) {
      if (!IsCompute(a.type)) continue;
      orders[r].push_back(
          {a.stage, a.type == Type::kF ? Pass::kForward : Pass::kBackward,
           a.micro_batch});
    }
  }
  return ScheduleFromIpuOrders(PipelineSchedule::kCustom, l.num_stages,
                               l.stage_row, l.micro_batches, l.training,
                               orders);
}

absl::StatusOr<ScheduleTable> ScheduleTableFromCsvFile(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("schedule CSV '", path, "' cannot be opened"));
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxScheduleCsvBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("schedule CSV '%s' has %d bytes; the limit is %d", path,
                        static_cast<int64_t>(size), kMaxScheduleCsvBytes));
  }
  std::string text(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(text.data(), size);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule CSV '", path, "' could not be read"));
  }
  absl::StatusOr<ScheduleTable> table = ScheduleTableFromCsv(text);
  if (!table.ok()) {
    return absl::Status(table.status().code(),
                        absl::StrCat(path, ": ", table.status().message()));
  }
  return table;
}

}  // namespace ipuflow::pipelining
