#include "pipelining/trace.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ipuflow::pipelining {
namespace {

int NumRows(const std::vector<TimedItem>& items) {
  int rows = 0;
  for (const TimedItem& item : items) rows = std::max(rows, item.ipu + 1);
  return rows;
}

double Makespan(const std::vector<TimedItem>& items) {
  double end = 0;
  for (const TimedItem& item : items) end = std::max(end, item.end);
  return end;
}

std::string Label(const TimedItem& item) {
  return absl::StrCat(PassLetter(item.pass), item.micro_batch);
}

// Escapes a string for a JSON string literal.
std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A 1-2-5 tick spacing giving at most ~8 ticks over `span`.
double TickSpacing(double span) {
  if (span <= 0) return 1;
  const double raw = span / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * magnitude >= raw) return f * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

std::string HumanSeconds(double seconds) {
  const double a = std::fabs(seconds);
  if (a == 0 || a >= 1) return absl::StrFormat("%.3g s", seconds);
  if (a >= 1e-3) return absl::StrFormat("%.3g ms", seconds * 1e3);
  if (a >= 1e-6) return absl::StrFormat("%.3g us", seconds * 1e6);
  return absl::StrFormat("%.3g ns", seconds * 1e9);
}

std::string ToTextTimeline(const std::vector<TimedItem>& items,
                           double column_seconds) {
  const double makespan = Makespan(items);
  double q = column_seconds;
  if (q <= 0) {
    for (const TimedItem& item : items) {
      if (item.duration() > 0 && (q <= 0 || item.duration() < q)) {
        q = item.duration();
      }
    }
  }
  if (q <= 0) q = 1;
  constexpr int kMaxColumns = 400;
  q = std::max(q, makespan / kMaxColumns);
  // Columns whose midpoint lies before the end; tolerate rounding.
  const int columns = static_cast<int>(std::ceil(makespan / q - 1e-9));

  const int rows = NumRows(items);
  std::vector<std::vector<TimedItem>> by_ipu(rows);
  size_t width = 1;
  for (const TimedItem& item : items) {
    by_ipu[item.ipu].push_back(item);
    width = std::max(width, Label(item).size());
  }
  const std::string last = absl::StrCat("IPU", rows - 1);
  std::string out = absl::StrCat("(1 column = ", HumanSeconds(q), ")\n");
  for (int ipu = 0; ipu < rows; ++ipu) {
    std::vector<TimedItem>& row = by_ipu[ipu];
    std::sort(row.begin(), row.end(),
              [](const TimedItem& a, const TimedItem& b) {
                return a.start < b.start;
              });
    std::string line =
        absl::StrFormat("%-*s |", last.size(), absl::StrCat("IPU", ipu));
    size_t next = 0;
    for (int c = 0; c < columns; ++c) {
      const double mid = (c + 0.5) * q;
      while (next < row.size() && row[next].end <= mid) ++next;
      const bool running = next < row.size() && row[next].start <= mid;
      absl::StrAppendFormat(&line, " %-*s", width,
                            running ? Label(row[next]) : ".");
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string ToChromeTraceJson(const std::vector<TimedItem>& items,
                              const std::string& process_name) {
  std::vector<std::string> events;
  events.push_back(absl::StrFormat(
      R"({"name":"process_name","ph":"M","pid":0,"args":{"name":"%s"}})",
      JsonEscape(process_name)));
  for (int ipu = 0; ipu < NumRows(items); ++ipu) {
    events.push_back(
        absl::StrFormat(R"({"name":"thread_name","ph":"M","pid":0,"tid":%d,)"
                        R"("args":{"name":"IPU %d"}})",
                        ipu, ipu));
    events.push_back(absl::StrFormat(
        R"({"name":"thread_sort_index","ph":"M","pid":0,"tid":%d,)"
        R"("args":{"sort_index":%d}})",
        ipu, ipu));
  }
  std::vector<TimedItem> sorted = items;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const TimedItem& a, const TimedItem& b) { return a.start < b.start; });
  for (const TimedItem& item : sorted) {
    const bool fwd = item.pass == Pass::kForward;
    events.push_back(absl::StrFormat(
        R"({"name":"%s","cat":"%s","ph":"X","ts":%.3f,"dur":%.3f,"pid":0,)"
        R"("tid":%d,"cname":"%s","args":{"stage":%d,"micro_batch":%d}})",
        WorkItemName(item.work_item()), fwd ? "forward" : "backward",
        item.start * 1e6, item.duration() * 1e6, item.ipu,
        fwd ? "good" : "terrible", item.stage, item.micro_batch));
  }
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&out, events[i], i + 1 < events.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, "],\"displayTimeUnit\":\"ms\"}\n");
  return out;
}

std::string ToSvgTimeline(const std::vector<TimedItem>& items,
                          const SvgOptions& options) {
  constexpr int kLeft = 56, kTop = 36, kGap = 6, kAxis = 34, kRight = 24;
  constexpr const char* kForwardFill = "#6abf69";
  constexpr const char* kBackwardFill = "#e06666";
  const int rows = NumRows(items);
  const int row_h = std::max(options.row_height, 8);
  const double makespan = Makespan(items);
  const double span = makespan > 0 ? makespan : 1;
  const double scale = options.timeline_width / span;  // Pixels per second.
  const int axis_y = kTop + rows * (row_h + kGap);
  const int width = kLeft + options.timeline_width + kRight;
  const int height = axis_y + kAxis + 20;

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\" "
      "style=\"background:#ffffff\">\n",
      width, height, width, height);
  absl::StrAppendFormat(&svg,
                        "<text x=\"%d\" y=\"20\" font-size=\"14\">%s</text>\n",
                        kLeft, XmlEscape(options.title));
  for (int ipu = 0; ipu < rows; ++ipu) {
    absl::StrAppendFormat(
        &svg,
        "<text x=\"8\" y=\"%d\" dominant-baseline=\"middle\">IPU %d</text>\n",
        kTop + ipu * (row_h + kGap) + row_h / 2, ipu);
  }
  for (const TimedItem& item : items) {
    const bool fwd = item.pass == Pass::kForward;
    const double x = kLeft + item.start * scale;
    const double w = item.duration() * scale;
    const int y = kTop + item.ipu * (row_h + kGap);
    absl::StrAppendFormat(
        &svg,
        "<rect class=\"item %s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
        "height=\"%d\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\">"
        "<title>%s on IPU %d: %s to %s</title></rect>\n",
        fwd ? "forward" : "backward", x, y, w, row_h,
        fwd ? kForwardFill : kBackwardFill, WorkItemName(item.work_item()),
        item.ipu, HumanSeconds(item.start), HumanSeconds(item.end));
    if (w >= 16) {
      absl::StrAppendFormat(
          &svg,
          "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" "
          "dominant-baseline=\"middle\" fill=\"#ffffff\">%d</text>\n",
          x + w / 2, y + row_h / 2, item.micro_batch);
    }
  }
  // Time axis.
  absl::StrAppendFormat(
      &svg,
      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\"/>\n",
      kLeft, axis_y, kLeft + options.timeline_width, axis_y);
  const double tick = TickSpacing(span);
  for (int k = 0; k * tick <= span * (1 + 1e-9); ++k) {
    const double x = kLeft + k * tick * scale;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
                          "stroke=\"#333333\"/>\n<text x=\"%.2f\" y=\"%d\" "
                          "text-anchor=\"middle\">%s</text>\n",
                          x, axis_y, x, axis_y + 5, x, axis_y + 18,
                          HumanSeconds(k * tick));
  }
  // Legend.
  const int ly = axis_y + kAxis;
  absl::StrAppendFormat(
      &svg,
      "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" "
      "fill=\"%s\"/><text x=\"%d\" y=\"%d\">forward</text>\n"
      "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" "
      "fill=\"%s\"/><text x=\"%d\" y=\"%d\">backward (box label = "
      "micro-batch)</text>\n",
      kLeft, ly, kForwardFill, kLeft + 16, ly + 11, kLeft + 90, ly,
      kBackwardFill, kLeft + 106, ly + 11);
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace ipuflow::pipelining
