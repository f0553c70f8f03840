// SVG helpers.
#include "svg/svg_util.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "bufferlab/core/error.h"

namespace bufferlab::cli {

std::string svg_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string_view palette_color(size_t index) {
  // Tableau-like colours, light enough that black labels stay readable on them.
  static constexpr std::string_view kPalette[] = {
      "#8fb8de", "#f6b26b", "#93c47d", "#e6a0c4", "#b4a7d6", "#ffd966",
      "#76d7c4", "#f4a6a6", "#c9b18f", "#a4c2f4", "#d5e8a4", "#d9d9d9",
  };
  return kPalette[index % std::size(kPalette)];
}

double mono_text_width(std::string_view text, double font_size) {
  size_t glyphs = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80) ++glyphs;  // count UTF-8 code points, not bytes
  return 0.6 * font_size * static_cast<double>(glyphs);
}

std::string line_plot_axis_titles(std::string_view x_title, std::string_view y_title) {
  return fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"13\" text-anchor=\"middle\">{}</text>\n"
      "<text x=\"26\" y=\"{}\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 "
      "26 {})\">{}</text>\n",
      kPlotX + kPlotW / 2, kPlotY + kPlotH + 46, x_title, kPlotY + kPlotH / 2, kPlotY + kPlotH / 2,
      y_title);
}

std::string svg_open(double width, double height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"DejaVu Sans, Helvetica, Arial, "
      "sans-serif\">\n"
      "<style>.mono{{font-family:'DejaVu Sans Mono','Liberation Mono',Menlo,monospace}}</style>\n"
      "<rect x=\"0\" y=\"0\" width=\"{0:.0f}\" height=\"{1:.0f}\" fill=\"#ffffff\"/>\n",
      width, height);
}

std::string svg_close() { return "</svg>\n"; }

void write_text_file(const std::string& path, const std::string& content) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw Error("--svg = '" + path + "': cannot open the file for writing");
  file << content;
  file.close();
  if (!file) throw Error("--svg = '" + path + "': writing the file failed");
}

}  // namespace bufferlab::cli
