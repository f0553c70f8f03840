// sinkhorn_svg: the y axis is log10 because the error falls geometrically (κ^(2t)) until the
// FP64 rounding floor; a zero error is drawn on the bottom edge and a bound above the axis
// (κ = 1 bounds do not decay) on the top edge, both said in the legend notes.
#include "svg/svg_sinkhorn.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "svg/svg_util.h"

namespace bufferlab::cli {
namespace {

using oracle::SinkhornCaseTrace;
using oracle::SinkhornTrace;
using oracle::SinkhornTraceOptions;
using oracle::SinkhornViolation;

constexpr size_t kMaxCasesDrawn = 24;
constexpr uint64_t kMaxPointsPerLine = 1000;
constexpr int kFloorExp = -18;  // below 1e-18 nothing is FP64-meaningful for a row sum
constexpr int kCeilExp = 4;     // bounds above 1e4 say nothing; clipped to the top edge

// Dark enough to read as thin lines on white; neighbours differ.
constexpr const char* kLineColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                       "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};

std::string fmt_exp(int e) { return e == 0 ? "1" : fmt::format("1e{}", e); }

// A violation marker's centre, moved in from the frame so the whole circle (r = 5) is inside
// the plot: a violation at the first or last iteration, or above the axis, sits on an edge.
double inside(double at, double start, double length) {
  return std::clamp(at, start + 6, start + length - 6);
}

}  // namespace

std::string sinkhorn_svg(const SinkhornTrace& trace) {
  const SinkhornTraceOptions& o = trace.options;
  const uint64_t n = o.iters;
  const size_t drawn = std::min(trace.cases.size(), kMaxCasesDrawn);

  // y: whole decades around every drawn error and bound, within [1e-18, 1e4].
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (size_t c = 0; c < drawn; ++c)
    for (const auto* v : {&trace.cases[c].error, &trace.cases[c].bound})
      for (double x : *v)
        if (x > 0 && std::isfinite(x)) {
          lo = std::min(lo, std::log10(x));
          hi = std::max(hi, std::log10(x));
        }
  if (!std::isfinite(lo)) lo = -16, hi = 0;
  const int e_lo = std::clamp(static_cast<int>(std::floor(lo)), kFloorExp, kCeilExp - 1);
  const int raw_hi = std::clamp(static_cast<int>(std::ceil(hi)), e_lo + 1, kCeilExp);
  const int y_step = std::max(1, (raw_hi - e_lo + 11) / 12);
  const int e_hi = e_lo + (raw_hi - e_lo + y_step - 1) / y_step * y_step;  // a labelled top
  const double x_lo = n > 1 ? 1.0 : 0.0, x_hi = n > 1 ? static_cast<double>(n) : 2.0;
  auto px = [&](double t) { return kPlotX + (t - x_lo) / (x_hi - x_lo) * kPlotW; };
  auto py = [&](double value) {
    double l = value > 0 ? std::log10(value) : static_cast<double>(e_lo);
    if (std::isnan(value) || l > e_hi) l = e_hi;
    l = std::max(l, static_cast<double>(e_lo));
    return kPlotY + kPlotH - (l - e_lo) / (e_hi - e_lo) * kPlotH;
  };

  std::string out = svg_open(kLinePlotWidth, kLinePlotHeight);
  out += fmt::format(
      "<text x=\"24\" y=\"36\" font-size=\"22\" font-weight=\"bold\">Sinkhorn row-sum error vs "
      "iterations — comb logits uniform in [0, {}]</text>\n"
      "<text x=\"24\" y=\"60\" font-size=\"13\" fill=\"#444\">hc {} · eps {} · {} cases of seed "
      "{}{} · FP64, docs/spec/numerics.md §3 · {}</text>\n",
      o.range, o.hc, o.eps, trace.cases.size(), o.seed,
      drawn < trace.cases.size() ? fmt::format(" (first {} drawn)", drawn) : "",
      trace.holds() ? "every error within its bound"
                    : fmt::format("{} (case, iteration) pairs above the bound", trace.violations));
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
      kPlotX, kPlotY, kPlotW, kPlotH);

  for (int e = e_lo; e <= e_hi; e += y_step) {
    const double y = py(std::pow(10.0, e));
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"#e2e2e2\"/>\n"
        "<text x=\"{}\" y=\"{:.2f}\" font-size=\"12\" text-anchor=\"end\" class=\"mono\">{}"
        "</text>\n",
        kPlotX, y, kPlotX + kPlotW, y, kPlotX - 8, y + 4, fmt_exp(e));
  }
  // x ticks: about ten, at round iteration counts.
  const double raw = static_cast<double>(n) / 10.0;
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  uint64_t tick = static_cast<uint64_t>(mag);
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      tick = static_cast<uint64_t>(m * mag);
      break;
    }
  tick = std::max<uint64_t>(tick, 1);
  for (uint64_t t = tick; t <= n; t += tick) {
    const double x = px(static_cast<double>(t));
    out += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"#e2e2e2\"/>\n"
        "<text x=\"{:.2f}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" class=\"mono\">{}"
        "</text>\n",
        x, kPlotY, x, kPlotY + kPlotH, x, kPlotY + kPlotH + 20, t);
  }
  if (tick > 1)
    out += fmt::format(
        "<text x=\"{:.2f}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" class=\"mono\">1"
        "</text>\n",
        px(1.0), kPlotY + kPlotH + 20);
  out += line_plot_axis_titles("iterations (hc_sinkhorn_iters)",
                               "max_i |row sum_i − 1| (log10 scale)");

  // The frontier's targets, labelled in the margin right of the plot (inside, the label would
  // sit on the curves that cross the line).
  for (int target_exp : {-3, -6}) {
    if (target_exp < e_lo || target_exp > e_hi) continue;
    const double y = py(std::pow(10.0, target_exp));
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"#555\" "
        "stroke-width=\"1\" stroke-dasharray=\"2 4\"/>\n"
        "<text x=\"{}\" y=\"{:.2f}\" font-size=\"11\" fill=\"#555\" class=\"mono\">{}</text>\n",
        kPlotX, y, kPlotX + kPlotW, y, kPlotX + kPlotW + 4, y + 4, fmt_exp(target_exp));
  }

  // The real models' hc_sinkhorn_iters, labelled above the plot (inside, the label would sit
  // on the bounds that start near the top).
  if (n >= 20) {
    const double x = px(20.0);
    out += fmt::format(
        "<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#555\" "
        "stroke-width=\"1\" stroke-dasharray=\"2 4\"/>\n"
        "<text x=\"{0:.2f}\" y=\"{3}\" font-size=\"11\" fill=\"#555\" text-anchor=\"{4}\" "
        "class=\"mono\">20 (models)</text>\n",
        x, kPlotY, kPlotY + kPlotH, kPlotY - 6,
        // Right of the line, clear of the top y label; left of it near the legend.
        x > kPlotX + kPlotW / 2 ? "end" : "start");
  }

  // Lines: for each case its bound (dashed) and its error (solid), in the case's colour.
  const uint64_t stride = (n + kMaxPointsPerLine - 1) / kMaxPointsPerLine;
  auto polyline = [&](const std::vector<double>& v) {
    std::string points;
    for (uint64_t t = 1; t <= n; t += stride)
      points += fmt::format("{:.2f},{:.2f} ", px(static_cast<double>(t)), py(v[t - 1]));
    if ((n - 1) % stride != 0)
      points += fmt::format("{:.2f},{:.2f} ", px(static_cast<double>(n)), py(v[n - 1]));
    return points;
  };
  for (size_t c = 0; c < drawn; ++c) {
    const SinkhornCaseTrace& ct = trace.cases[c];
    const char* color = kLineColors[c % std::size(kLineColors)];
    out += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\" "
        "stroke-dasharray=\"6 4\" opacity=\"0.8\"><title>case {} bound (Δ {:.4g}, κ {:.4g})"
        "</title></polyline>\n",
        polyline(ct.bound), color, ct.index, ct.shape.delta, ct.shape.kappa);
    out += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"><title>case "
        "{} error</title></polyline>\n",
        polyline(ct.error), color, ct.index);
    if (ct.first_violation) {
      const SinkhornViolation& v = *ct.first_violation;
      out += fmt::format(
          "<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"5\" fill=\"none\" stroke=\"#c00\" "
          "stroke-width=\"2\"><title>case {} iteration {}: error {:.3g} &gt; bound {:.3g}"
          "</title></circle>\n",
          inside(px(static_cast<double>(v.iter)), kPlotX, kPlotW),
          inside(py(v.error), kPlotY, kPlotH), v.case_index, v.iter, v.error, v.bound);
    }
  }

  // Legend to the right of the plot, past the target labels.
  double ly = kPlotY + 10;
  const double lx = kPlotX + kPlotW + 48;
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">Legend</text>\n", lx, ly);
  ly += 22;
  const size_t listed = std::min<size_t>(drawn, 12);
  for (size_t c = 0; c < listed; ++c) {
    const SinkhornCaseTrace& ct = trace.cases[c];
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"1.8\"/>"
        "\n<text x=\"{}\" y=\"{:.2f}\" font-size=\"12\" class=\"mono\">case {} κ {:.3f}</text>\n",
        lx, ly - 4, lx + 34, ly - 4, kLineColors[c % std::size(kLineColors)], lx + 42, ly, ct.index,
        ct.shape.kappa);
    ly += 20;
  }
  if (listed < drawn) {
    out += fmt::format(
        "<text x=\"{}\" y=\"{:.2f}\" font-size=\"11\" fill=\"#666\">… {} more cases</text>\n", lx,
        ly, drawn - listed);
    ly += 20;
  }
  ly += 6;
  for (const char* note : {"solid: row-sum error", "dashed: Birkhoff–Hopf bound",
                           "  (FP64 slack, u = 2^-53)", "dotted: targets 1e-3, 1e-6",
                           "  and 20 iterations (models)", "zero drawn on the bottom edge,",
                           "bounds above the axis on the top", "red circle: first violation"}) {
    out += fmt::format("<text x=\"{}\" y=\"{:.2f}\" font-size=\"11\" fill=\"#666\">{}</text>\n", lx,
                       ly, svg_escape(note));
    ly += 15;
  }
  return out + svg_close();
}

}  // namespace bufferlab::cli
