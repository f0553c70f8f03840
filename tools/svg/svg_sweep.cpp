// sweep_svg: both axes are log2 because m spans several orders of magnitude and so do the
// sizes; a linear y axis would flatten everything below the largest point.
#include "svg/svg_sweep.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "common/human_bytes.h"
#include "plan/sweep.h"
#include "svg/svg_util.h"

namespace bufferlab::cli {
namespace {

constexpr size_t kMaxBufferLines = 5;
constexpr double kMarkerInset = 12;  // px between the frame and the first / last point

struct Series {
  std::string name;
  std::string color;
  double width = 2;
  std::string dash;              // SVG stroke-dasharray, empty = solid
  std::vector<uint64_t> values;  // one per sweep point; 0 = not drawn (log scale)
};

// The buffers worth a line: the largest few at the last and at the first point.
std::vector<BufferId> buffer_lines(const std::vector<PlanResult>& sweep) {
  std::vector<BufferId> ids;
  for (const PlanResult* p : {&sweep.back(), &sweep.front()})
    for (BufferId id : largest_buffers(*p, 3))
      if (std::find(ids.begin(), ids.end(), id) == ids.end() && ids.size() < kMaxBufferLines)
        ids.push_back(id);
  return ids;
}

std::vector<Series> make_series(const std::vector<PlanResult>& sweep) {
  std::vector<Series> out;
  Series total{"total_bytes", "#1f3a5f", 4, "", {}};
  Series arena{"arena_bytes", "#f39c12", 1.6, "6 6", {}};
  for (const auto& p : sweep) {
    total.values.push_back(p.sizes.total_bytes());
    arena.values.push_back(p.layout.arena_bytes());
  }
  out.push_back(total);
  out.push_back(arena);
  static constexpr const char* kColors[] = {"#2a9d8f", "#c0392b", "#8e44ad", "#7f8c8d", "#27ae60"};
  size_t k = 0;
  for (BufferId id : buffer_lines(sweep)) {
    Series s{std::string(buffer_name(id)), kColors[k++ % std::size(kColors)], 2, "5 3", {}};
    for (const auto& p : sweep) s.values.push_back(p.sizes.bytes(id));
    out.push_back(s);
  }
  return out;
}

std::string tick_label_m(uint64_t m) {
  if (m >= (uint64_t{1} << 20) && m % (uint64_t{1} << 20) == 0) return fmt::format("{}Mi", m >> 20);
  if (m >= 1024 && m % 1024 == 0) return fmt::format("{}Ki", m >> 10);
  return std::to_string(m);
}

}  // namespace

std::string sweep_svg(const std::vector<PlanResult>& sweep) {
  if (sweep.empty()) return svg_open(kLinePlotWidth, kLinePlotHeight) + svg_close();
  const std::vector<Series> series = make_series(sweep);

  // x: log2(m), padded by one step when the sweep is a single point.
  double x_lo = std::log2(static_cast<double>(sweep.front().context.shape.max_batch_tokens));
  double x_hi = std::log2(static_cast<double>(sweep.back().context.shape.max_batch_tokens));
  if (x_hi - x_lo < 1e-9) x_lo -= 1, x_hi += 1;
  // y: whole powers of two around every drawn value.
  double y_min = std::numeric_limits<double>::max(), y_max = 0;
  for (const auto& s : series)
    for (uint64_t v : s.values)
      if (v > 0) {
        y_min = std::min(y_min, std::log2(static_cast<double>(v)));
        y_max = std::max(y_max, std::log2(static_cast<double>(v)));
      }
  // Ticks every y_step powers of two (at most ~10), the axis ends snapped to ticks.
  const int raw_lo = static_cast<int>(std::floor(y_min));
  const int raw_hi = std::max(
      raw_lo + 1, static_cast<int>(std::ceil(y_max + 0.25)));  // headroom for the end label
  const int y_step = std::max(1, (raw_hi - raw_lo + 9) / 10);
  const int e_lo = raw_lo / y_step * y_step;
  const int e_hi = std::max(e_lo + y_step, (raw_hi + y_step - 1) / y_step * y_step);
  // The first and last points sit kMarkerInset inside the frame, so their markers do too.
  auto px = [&](double lx) {
    return kPlotX + kMarkerInset + (lx - x_lo) / (x_hi - x_lo) * (kPlotW - 2 * kMarkerInset);
  };
  auto py = [&](double ly) { return kPlotY + kPlotH - (ly - e_lo) / (e_hi - e_lo) * kPlotH; };

  const PlanContext& c = sweep.front().context;
  std::string out = svg_open(kLinePlotWidth, kLinePlotHeight);
  out += fmt::format(
      "<text x=\"24\" y=\"36\" font-size=\"22\" font-weight=\"bold\">{} — workspace vs "
      "max_batch_tokens ({} … {})</text>\n"
      "<text x=\"24\" y=\"60\" font-size=\"13\" fill=\"#444\">max_seq_len {} · kv_block_size {} "
      "· max_batch_size {} · target {} (split-K {}) · sizing {} · alignment {} B · {} "
      "points</text>\n",
      svg_escape(c.model), sweep.front().context.shape.max_batch_tokens,
      sweep.back().context.shape.max_batch_tokens, c.shape.max_seq_len, c.shape.kv_block_size,
      c.shape.max_batch_size, svg_escape(c.target.name), c.target.splitk_string(),
      svg_escape(sweep.front().sizing), sweep.front().layout.alignment(), sweep.size());
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
      kPlotX, kPlotY, kPlotW, kPlotH);

  // y grid.
  for (int e = e_lo; e <= e_hi; e += y_step) {
    const double y = py(e);
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"#e2e2e2\"/>\n"
        "<text x=\"{}\" y=\"{:.2f}\" font-size=\"12\" text-anchor=\"end\" class=\"mono\">{}"
        "</text>\n",
        kPlotX, y, kPlotX + kPlotW, y, kPlotX - 8, y + 4,
        e < 64 ? human_bytes(uint64_t{1} << e) : "16 EiB");
  }
  // x ticks at every sweep point; labels thinned so they never collide.
  double last_label_end = -1e9;
  for (const auto& p : sweep) {
    const uint64_t m = p.context.shape.max_batch_tokens;
    const double x = px(std::log2(static_cast<double>(m)));
    const std::string label = tick_label_m(m);
    const double w = mono_text_width(label, 12);
    out += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"#e2e2e2\"/>\n"
        "<line x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"#666\"/>\n",
        x, kPlotY, x, kPlotY + kPlotH, x, kPlotY + kPlotH, x, kPlotY + kPlotH + 5);
    if (x - w / 2 < last_label_end + 6) continue;
    out += fmt::format(
        "<text x=\"{:.2f}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" class=\"mono\">{}"
        "</text>\n",
        x, kPlotY + kPlotH + 20, label);
    last_label_end = x + w / 2;
  }
  out += line_plot_axis_titles("max_batch_tokens m (log2 scale)", "bytes (log2 scale)");

  // Lines: buffers first, then the total, then the arena dashed on top of it (the two differ
  // only by alignment padding, so the dashes are what tells them apart).
  std::vector<const Series*> order;
  for (size_t i = 2; i < series.size(); ++i) order.push_back(&series[i]);
  order.push_back(&series[0]);
  order.push_back(&series[1]);
  for (const Series* it : order) {
    std::string points;
    for (size_t i = 0; i < sweep.size(); ++i) {
      if (it->values[i] == 0) continue;
      points +=
          fmt::format("{:.2f},{:.2f} ",
                      px(std::log2(static_cast<double>(sweep[i].context.shape.max_batch_tokens))),
                      py(std::log2(static_cast<double>(it->values[i]))));
    }
    out +=
        fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n",
                    points, it->color, it->width,
                    it->dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", it->dash));
    if (it == &series.front())
      for (size_t i = 0; i < sweep.size(); ++i)
        out += fmt::format(
            "<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"><title>m {}: {}</title>"
            "</circle>\n",
            px(std::log2(static_cast<double>(sweep[i].context.shape.max_batch_tokens))),
            py(std::log2(static_cast<double>(it->values[i]))), it->color,
            sweep[i].context.shape.max_batch_tokens, human_bytes(it->values[i]));
  }
  // End values of the total, where a reader looks first.
  for (const PlanResult* p : {&sweep.front(), &sweep.back()}) {
    const uint64_t total = p->sizes.total_bytes();
    const double x = px(std::log2(static_cast<double>(p->context.shape.max_batch_tokens)));
    out += fmt::format(
        "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"12\" font-weight=\"bold\" fill=\"#1f3a5f\" "
        "text-anchor=\"{}\">{}</text>\n",
        x + (p == &sweep.front() ? 6 : -6), py(std::log2(static_cast<double>(total))) - 10,
        p == &sweep.front() ? "start" : "end", human_bytes(total));
  }

  // Legend to the right of the plot.
  double ly = kPlotY + 10;
  const double lx = kPlotX + kPlotW + 24;
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">Legend</text>\n", lx, ly);
  ly += 22;
  for (const auto& s : series) {
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"{}\" "
        "stroke-width=\"{}\"{}/>"
        "\n<text x=\"{}\" y=\"{:.2f}\" font-size=\"12\" class=\"mono\">{}</text>\n",
        lx, ly - 4, lx + 34, ly - 4, s.color, s.width,
        s.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", s.dash), lx + 42, ly,
        svg_escape(s.name));
    ly += 20;
  }
  ly += 6;
  for (const char* note : {"arena = total + alignment padding;", "dashed buffers: the largest",
                           "at the first and last point"}) {
    out += fmt::format("<text x=\"{}\" y=\"{:.2f}\" font-size=\"11\" fill=\"#666\">{}</text>\n", lx,
                       ly, note);
    ly += 15;
  }
  return out + svg_close();
}

}  // namespace bufferlab::cli
