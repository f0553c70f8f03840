// Layout checks of the CLI's line plots (sinkhorn, plan --sweep), read from the SVG text: the
// plot frame is the <rect ... fill="#fafafa">; no <text> may sit inside it (a label there lies
// on the curves) and every <circle> marker must lie wholly inside it.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace bufferlab::testing {

struct SvgFrame {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

inline SvgFrame svg_plot_frame(const std::string& svg) {
  std::smatch m;
  const std::regex frame(
      R"re(<rect x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)" height="([-0-9.]+)" fill="#fafafa")re");
  if (!std::regex_search(svg, m, frame)) {
    ADD_FAILURE() << "no plot frame in " << svg.substr(0, 2000);
    return {};
  }
  const double x0 = std::stod(m[1]), y0 = std::stod(m[2]);
  return {x0, y0, x0 + std::stod(m[3]), y0 + std::stod(m[4])};
}

// Every <text x y> outside the frame; returns how many texts there are.
inline size_t expect_labels_outside_frame(const std::string& svg) {
  const SvgFrame f = svg_plot_frame(svg);
  const std::regex text(R"re(<text x="([-0-9.]+)" y="([-0-9.]+)"[^>]*>([^<]*)<)re");
  size_t texts = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), text), end; it != end; ++it, ++texts) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    EXPECT_FALSE(x > f.x0 && x < f.x1 && y > f.y0 && y < f.y1)
        << "label '" << (*it)[3] << "' at (" << x << ", " << y << ") lies inside the plot";
  }
  return texts;
}

// Every <circle cx cy r> wholly inside the frame; returns how many circles there are.
inline size_t expect_markers_inside_frame(const std::string& svg) {
  const SvgFrame f = svg_plot_frame(svg);
  const std::regex circle(R"re(<circle cx="([-0-9.]+)" cy="([-0-9.]+)" r="([-0-9.]+)")re");
  size_t circles = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), circle), end; it != end; ++it, ++circles) {
    const double cx = std::stod((*it)[1]), cy = std::stod((*it)[2]), r = std::stod((*it)[3]);
    EXPECT_TRUE(cx - r >= f.x0 && cx + r <= f.x1 && cy - r >= f.y0 && cy + r <= f.y1)
        << "marker at (" << cx << ", " << cy << ") r " << r << " crosses the frame";
  }
  return circles;
}

}  // namespace bufferlab::testing
