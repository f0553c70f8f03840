// arena_svg: geometry first (segments, in-block labels, call-out tiers), then drawing, so
// the height of every part is known before anything is emitted.
#include "svg/svg_arena.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/human_bytes.h"
#include "plan/sweep.h"
#include "svg/svg_util.h"

namespace bufferlab::cli {
namespace {

constexpr double kArenaWidth = 1200;
constexpr double kBandX = 96;  // room for the row-start offsets on the left
constexpr double kBandW = kArenaWidth - kBandX - 24;
constexpr int kRows = 4;
constexpr double kBandH = 46;
constexpr double kTierH = 15;  // one tier of call-out numbers
constexpr double kRowGap = 14;
constexpr double kCalloutFont = 11;
constexpr double kLegendLine = 17;
constexpr size_t kHighlighted = 3;

// One buffer's piece inside one row of the wrapped bar.
struct Segment {
  size_t buffer = 0;  // registry index
  int row = 0;
  double x0 = 0, x1 = 0;           // pixels, x1 - x0 ≥ 1
  std::vector<std::string> label;  // lines drawn inside; empty = no room
  double font = 12;
};

struct Callout {
  size_t buffer = 0;
  double anchor = 0;  // x of the block's centre
  double x = 0;       // left edge of the label
  int tier = 0;
  std::string text;  // the buffer's name, or its legend number where names would crowd
};

struct Geometry {
  uint64_t row_bytes = 1;
  std::vector<Segment> segments;
  std::vector<std::vector<Callout>> callouts = std::vector<std::vector<Callout>>(kRows);
  std::vector<int> tiers = std::vector<int>(kRows, 0);
};

bool fits(const std::vector<std::string>& lines, double font, double width) {
  for (const auto& line : lines)
    if (mono_text_width(line, font) + 6 > width) return false;
  return true;
}

// The richest label that fits a block `width` pixels wide, or none. A buffer split over
// rows is marked "(i/n)" on each piece so the pieces read as one buffer.
void choose_label(Segment& s, std::string_view name, const std::string& size, bool widest,
                  size_t part, size_t parts) {
  const double w = s.x1 - s.x0;
  const std::string n(name);
  const std::string tagged = parts > 1 ? fmt::format("{} ({}/{})", n, part, parts) : n;
  const std::vector<std::vector<std::string>> options =
      widest ? std::vector<std::vector<std::string>>{{tagged, size}, {n, size}, {n}}
             : std::vector<std::vector<std::string>>{{tagged}, {n}};
  for (double font : {12.0, 10.0})
    for (const auto& lines : options)
      if (fits(lines, font, w)) {
        s.label = lines;
        s.font = font;
        return;
      }
}

// Spreads the call-outs of one row over as few tiers as keep them apart, each label as
// close to its anchor as its neighbours allow. Returns the tier count and the largest
// distance of a label from its anchor.
std::pair<int, double> place_callouts(std::vector<Callout>& row) {
  if (row.empty()) return {0, 0};
  std::sort(row.begin(), row.end(), [](const Callout& a, const Callout& b) {
    return a.anchor < b.anchor || (a.anchor == b.anchor && a.buffer < b.buffer);
  });
  double needed = 0;
  for (const auto& c : row) needed += mono_text_width(c.text, kCalloutFont) + 6;
  const int tiers = std::max(1, static_cast<int>(std::ceil(needed / (kBandW * 0.9))));
  double worst = 0;
  for (int t = 0; t < tiers; ++t) {
    std::vector<Callout*> tier;
    for (size_t i = t; i < row.size(); i += tiers) tier.push_back(&row[i]);
    double next_free = kBandX;
    for (Callout* c : tier) {  // left to right: no overlap with the previous label
      const double w = mono_text_width(c->text, kCalloutFont);
      c->tier = t;
      c->x = std::max(c->anchor - w / 2, next_free);
      next_free = c->x + w + 6;
    }
    double limit = kBandX + kBandW;
    for (auto it = tier.rbegin(); it != tier.rend(); ++it) {  // right to left: stay inside
      const double w = mono_text_width((*it)->text, kCalloutFont);
      (*it)->x = std::min((*it)->x, limit - w);
      limit = (*it)->x - 6;
      worst = std::max(worst, std::abs((*it)->x + w / 2 - (*it)->anchor));
    }
  }
  return {tiers, worst};
}

// Names where they stay near their blocks; legend numbers for the crowded ones (many tiny
// buffers side by side would otherwise push their names far from what they label).
int label_callouts(std::vector<Callout>& row) {
  constexpr double kMaxDrift = 120;  // pixels between a name and its block
  for (auto& c : row) c.text = std::string(kBufferRegistry[c.buffer].name);
  for (;;) {
    // One name at a time becomes a number — the one drifting furthest — because freeing
    // its room may bring the others back next to their blocks.
    const int tiers = place_callouts(row).first;
    Callout* worst = nullptr;
    double worst_drift = tiers > 2 ? 0 : kMaxDrift;
    for (auto& c : row) {
      if (c.text != kBufferRegistry[c.buffer].name) continue;
      const double drift = std::abs(c.x + mono_text_width(c.text, kCalloutFont) / 2 - c.anchor);
      if (drift > worst_drift || (tiers > 2 && !worst)) {
        worst = &c;
        worst_drift = drift;
      }
    }
    if (!worst) return tiers;
    worst->text = std::to_string(worst->buffer + 1);
  }
}

Geometry layout_geometry(const PlanResult& plan) {
  Geometry g;
  const uint64_t arena = std::max<uint64_t>(plan.layout.arena_bytes(), 1);
  g.row_bytes = (arena + kRows - 1) / kRows;
  const double px_per_byte = kBandW / static_cast<double>(g.row_bytes);
  for (size_t i = 0; i < kBufferRegistry.size(); ++i) {
    const auto& info = kBufferRegistry[i];
    const LayoutEntry e = plan.layout.entry(info.id);
    if (e.is_null()) continue;
    std::vector<Segment> pieces;
    for (uint64_t pos = e.offset; pos < e.end();) {
      const int row = static_cast<int>(std::min<uint64_t>(pos / g.row_bytes, kRows - 1));
      const uint64_t row_start = static_cast<uint64_t>(row) * g.row_bytes;
      const uint64_t row_end = row == kRows - 1 ? e.end() : row_start + g.row_bytes;
      const uint64_t stop = std::min(e.end(), row_end);
      Segment s{i, row, kBandX + (pos - row_start) * px_per_byte,
                kBandX + (stop - row_start) * px_per_byte};
      s.x1 = std::max(s.x1, s.x0 + 1);  // a 256-byte buffer still shows as a hairline
      pieces.push_back(s);
      pos = stop;
    }
    auto widest = std::max_element(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) {
      return a.x1 - a.x0 < b.x1 - b.x0;
    });
    for (size_t k = 0; k < pieces.size(); ++k)
      choose_label(pieces[k], info.name, human_bytes(e.bytes), &pieces[k] == &*widest, k + 1,
                   pieces.size());
    if (widest->label.empty())
      g.callouts[widest->row].push_back(
          Callout{i, (widest->x0 + widest->x1) / 2, 0, 0, fmt::format("{}", i + 1)});
    g.segments.insert(g.segments.end(), pieces.begin(), pieces.end());
  }
  for (int r = 0; r < kRows; ++r) g.tiers[r] = label_callouts(g.callouts[r]);
  return g;
}

double row_height(const Geometry& g, int row) {
  return kBandH + 6 + g.tiers[row] * kTierH + kRowGap;
}

std::string title_block(const PlanResult& plan, const std::vector<BufferId>& top, double& y) {
  const PlanContext& c = plan.context;
  const uint64_t total = plan.sizes.total_bytes();
  const uint64_t arena = plan.layout.arena_bytes();
  std::string out;
  out += fmt::format(
      "<text x=\"24\" y=\"{}\" font-size=\"22\" font-weight=\"bold\">{} — per-pass arena "
      "{}</text>\n",
      y += 34, svg_escape(c.model), human_bytes(arena));
  out += fmt::format(
      "<text x=\"24\" y=\"{}\" font-size=\"13\" fill=\"#444\">max_batch_tokens {} · max_seq_len "
      "{} · kv_block_size {} · max_batch_size {} · target {} ({} SMs, split-K {}{}{}) · sizing "
      "{}</text>\n",
      y += 22, c.shape.max_batch_tokens, c.shape.max_seq_len, c.shape.kv_block_size,
      c.shape.max_batch_size, svg_escape(c.target.name), c.target.sm_count,
      c.target.splitk_string(), c.target.q2_dequant ? ", Q2 dequant" : "",
      c.target.q2_mmq ? ", Q2 MMQ" : "", svg_escape(plan.sizing));
  out += fmt::format(
      "<text x=\"24\" y=\"{}\" font-size=\"13\" fill=\"#444\">total_bytes {} ({}) · arena_bytes "
      "{} ({}) · padding {} · alignment {} B · redzone {} B</text>\n",
      y += 18, group_digits(total), human_bytes(total), group_digits(arena), human_bytes(arena),
      human_bytes(arena - plan.layout.allocated_bytes()), plan.layout.alignment(),
      plan.layout.redzone());
  std::string largest;
  for (BufferId id : top) {
    const uint64_t b = plan.sizes.bytes(id);
    largest += fmt::format("{}{} {} ({:.1f}%)", largest.empty() ? "" : ", ", buffer_name(id),
                           human_bytes(b), total ? 100.0 * b / total : 0.0);
  }
  out += fmt::format(
      "<text x=\"24\" y=\"{}\" font-size=\"13\" fill=\"#444\">largest (outlined): "
      "{}</text>\n",
      y += 18, svg_escape(largest));
  return out;
}

std::string band_block(const PlanResult& plan, const Geometry& g, const std::vector<BufferId>& top,
                       double& y) {
  auto is_top = [&](size_t i) {
    return std::find(top.begin(), top.end(), kBufferRegistry[i].id) != top.end();
  };
  std::string out;
  out += fmt::format(
      "<text x=\"24\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">Arena to scale</text>"
      "<text x=\"150\" y=\"{}\" font-size=\"12\" fill=\"#666\">each row holds {} (left: offset "
      "of the row start); grey = alignment padding; a number is the legend # of a block too "
      "small to name</text>\n",
      y + 18, y + 18, human_bytes(g.row_bytes));
  y += 30;
  std::vector<double> row_y(kRows);
  for (int r = 0; r < kRows; ++r) {
    row_y[r] = y;
    y += row_height(g, r);
  }
  const uint64_t arena = plan.layout.arena_bytes();
  for (int r = 0; r < kRows; ++r) {
    const uint64_t start = static_cast<uint64_t>(r) * g.row_bytes;
    const uint64_t end = std::min(arena, start + g.row_bytes);
    const double used = end > start ? kBandW * static_cast<double>(end - start) / g.row_bytes : 0;
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{}\" fill=\"#e4e4e4\"/>\n"
        "<text x=\"{}\" y=\"{:.2f}\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\" "
        "class=\"mono\">{}</text>\n",
        kBandX, row_y[r], used, kBandH, kBandX - 6, row_y[r] + kBandH / 2 + 4,
        human_bytes(std::min(start, arena)));
  }
  // Draw the highlighted blocks last so their outline is not covered by a neighbour.
  std::vector<const Segment*> order;
  for (const auto& s : g.segments) order.push_back(&s);
  std::stable_partition(order.begin(), order.end(),
                        [&](const Segment* s) { return !is_top(s->buffer); });
  for (const Segment* s : order) {
    const bool top_buffer = is_top(s->buffer);
    const double sy = row_y[s->row];
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" "
        "stroke=\"{}\" stroke-width=\"{}\"><title>{} {} @ {}</title></rect>\n",
        s->x0, sy, s->x1 - s->x0, kBandH, palette_color(s->buffer),
        top_buffer ? "#c0392b" : "#ffffff", top_buffer ? 2.5 : 0.5, kBufferRegistry[s->buffer].name,
        human_bytes(plan.sizes.bytes(kBufferRegistry[s->buffer].id)),
        plan.layout.entry(kBufferRegistry[s->buffer].id).offset);
    if (s->label.empty()) continue;
    const double line_h = s->font + 2;
    double ty = sy + kBandH / 2 - (s->label.size() - 1) * line_h / 2 + s->font * 0.35;
    for (size_t l = 0; l < s->label.size(); ++l, ty += line_h)
      out += fmt::format(
          "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"{}\" text-anchor=\"middle\" "
          "class=\"mono\"{}>{}</text>\n",
          (s->x0 + s->x1) / 2, ty, s->font, top_buffer || l > 0 ? " font-weight=\"bold\"" : "",
          svg_escape(s->label[l]));
  }
  for (int r = 0; r < kRows; ++r)
    for (const Callout& c : g.callouts[r]) {
      const double w = mono_text_width(c.text, kCalloutFont);
      const double label_top = row_y[r] + kBandH + 6 + c.tier * kTierH;
      out += fmt::format(
          "<polyline points=\"{:.2f},{:.2f} {:.2f},{:.2f} {:.2f},{:.2f}\" fill=\"none\" "
          "stroke=\"#888\" stroke-width=\"0.7\"/>\n"
          "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"{}\" class=\"mono\" fill=\"#222\">{}"
          "</text>\n",
          c.anchor, row_y[r] + kBandH, c.anchor, row_y[r] + kBandH + 3, c.x + w / 2, label_top + 2,
          c.x, label_top + kCalloutFont, kCalloutFont, svg_escape(c.text));
    }
  return out;
}

// One line of the legend table; the header uses the same widths so the columns line up.
std::string legend_row(std::string_view index, std::string_view name, std::string_view size,
                       std::string_view offset, std::string_view percent) {
  return fmt::format("{:>3}  {:<20} {:>10} {:>15}  {:>10}", index, name, size, offset, percent);
}

std::string legend_block(const PlanResult& plan, const std::vector<BufferId>& top, double& y) {
  const uint64_t total = std::max<uint64_t>(plan.sizes.total_bytes(), 1);
  uint64_t largest = 1;
  for (const auto& info : kBufferRegistry) largest = std::max(largest, plan.sizes.bytes(info.id));
  constexpr double kBarX = 690, kBarW = kArenaWidth - kBarX - 24;
  std::string out;
  out += fmt::format(
      "<text x=\"24\" y=\"{:.2f}\" font-size=\"14\" font-weight=\"bold\">Buffers in layout "
      "order</text>\n"
      "<text x=\"40\" y=\"{:.2f}\" font-size=\"12\" class=\"mono\" fill=\"#555\" "
      "xml:space=\"preserve\">{}</text>\n"
      "<text x=\"{}\" y=\"{:.2f}\" font-size=\"12\" fill=\"#555\">bytes, linear (largest buffer "
      "= full width)</text>\n",
      y + 18, y + 38, svg_escape(legend_row("#", "buffer", "size", "offset", "% of total")), kBarX,
      y + 38);
  y += 44;
  for (size_t i = 0; i < kBufferRegistry.size(); ++i) {
    const auto& info = kBufferRegistry[i];
    const LayoutEntry e = plan.layout.entry(info.id);
    if (e.is_null()) continue;
    const auto rank = std::find(top.begin(), top.end(), info.id);
    const bool is_top = rank != top.end();
    const double pct = 100.0 * static_cast<double>(e.bytes) / total;
    const std::string row = legend_row(std::to_string(i + 1), info.name, human_bytes(e.bytes),
                                       group_digits(e.offset), fmt::format("{:.2f}", pct));
    out += fmt::format(
        "<rect x=\"24\" y=\"{:.2f}\" width=\"12\" height=\"12\" fill=\"{}\" stroke=\"{}\" "
        "stroke-width=\"{}\"/>\n"
        "<text x=\"40\" y=\"{:.2f}\" font-size=\"12\" class=\"mono\" xml:space=\"preserve\"{}>"
        "{}</text>\n"
        "<rect x=\"{}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"11\" fill=\"{}\"/>\n",
        y + 2, palette_color(i), is_top ? "#c0392b" : "#999", is_top ? 2 : 0.5, y + 12,
        is_top ? " font-weight=\"bold\"" : "", svg_escape(row), kBarX, y + 2.5,
        std::max(1.0, kBarW * static_cast<double>(e.bytes) / largest),
        is_top ? "#c0392b" : "#7f9cbf");
    if (is_top)
      out += fmt::format(
          "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"11\" fill=\"#c0392b\" "
          "font-weight=\"bold\" text-anchor=\"end\">largest #{}</text>\n",
          kBarX - 6, y + 12, rank - top.begin() + 1);
    y += kLegendLine;
  }
  return out;
}

std::string null_block(const PlanResult& plan, double& y) {
  std::vector<std::string> names;
  for (size_t i = 0; i < kBufferRegistry.size(); ++i)
    if (plan.layout.entry(kBufferRegistry[i].id).is_null())
      names.push_back(fmt::format("#{} {}", i + 1, kBufferRegistry[i].name));
  std::string out = fmt::format(
      "<text x=\"24\" y=\"{:.2f}\" font-size=\"14\" font-weight=\"bold\">Null buffers ({}): "
      "no storage, offset null</text>\n",
      y + 22, names.size());
  y += 30;
  if (names.empty()) {
    out += fmt::format(
        "<text x=\"40\" y=\"{:.2f}\" font-size=\"12\" fill=\"#555\">none: every "
        "buffer of the registry has storage</text>\n",
        y + 12);
    y += kLegendLine;
    return out;
  }
  std::string line;
  auto flush = [&] {
    out += fmt::format(
        "<text x=\"40\" y=\"{:.2f}\" font-size=\"12\" class=\"mono\" "
        "fill=\"#555\">{}</text>\n",
        y + 12, svg_escape(line));
    y += kLegendLine;
    line.clear();
  };
  for (const auto& n : names) {
    const std::string next = line.empty() ? n : line + ",  " + n;
    if (!line.empty() && mono_text_width(next, 12) > kArenaWidth - 80) flush();
    line = line.empty() ? n : line + ",  " + n;
  }
  flush();
  return out;
}

}  // namespace

std::string arena_svg(const PlanResult& plan) {
  const Geometry g = layout_geometry(plan);
  const std::vector<BufferId> top = largest_buffers(plan, kHighlighted);
  double y = 0;
  std::string body = title_block(plan, top, y);
  y += 16;
  body += band_block(plan, g, top, y);
  body += legend_block(plan, top, y);
  body += null_block(plan, y);
  y += 16;
  return svg_open(kArenaWidth, y) + body + svg_close();
}

}  // namespace bufferlab::cli
