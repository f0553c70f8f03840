// Small helpers shared by the SVG writers: escaping, the categorical palette, text width
// estimates (for label placement without a font engine) and writing the file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace bufferlab::cli {

// Escapes &, <, >, " and ' for SVG text and attribute values.
std::string svg_escape(std::string_view text);

// A categorical colour; neighbours in index order always differ.
std::string_view palette_color(size_t index);

// Approximate rendered width of `text` in the monospace font the SVGs use. Exact for
// DejaVu Sans Mono / Liberation Mono (0.6 em per glyph), close enough for others.
double mono_text_width(std::string_view text, double font_size);

// The frame of the line plots (svg_sweep, svg_sinkhorn), in px: the canvas and the plot area.
inline constexpr double kLinePlotWidth = 1100, kLinePlotHeight = 640;
inline constexpr double kPlotX = 100, kPlotY = 96, kPlotW = 700, kPlotH = 460;

// The axis titles of a line plot: `x_title` centred below the plot area, `y_title` rotated
// at its left. Both are SVG text, escaped by the caller where needed.
std::string line_plot_axis_titles(std::string_view x_title, std::string_view y_title);

// The <svg> opening tag with a white background, and a fixed font stack.
std::string svg_open(double width, double height);
std::string svg_close();

// Writes `content` to `path`; throws bufferlab::Error naming the path on failure.
void write_text_file(const std::string& path, const std::string& content);

}  // namespace bufferlab::cli
