#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reports/format/svg_plot.hpp"

using namespace commtool::reports;

namespace {

// ---- a minimal XML well-formedness check: declaration, one root, balanced tags, quoted
// attributes without '<', and '&' only as one of the five entities or a character reference.
std::string xml_problem(const std::string& doc) {
  if (doc.rfind("<?xml ", 0) != 0) return "no XML declaration";
  std::vector<std::string> open;
  bool seen_root = false;
  size_t i = 0;
  while (i < doc.size()) {
    const char c = doc[i];
    if (c == '&') {
      const size_t semi = doc.find(';', i);
      if (semi == std::string::npos) return "unterminated entity";
      const std::string entity = doc.substr(i, semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;" && entity.rfind("&#", 0) != 0)
        return "bad entity " + entity;
      i = semi + 1;
      continue;
    }
    if (c != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(c))) return "text outside root";
      ++i;
      continue;
    }
    if (doc.compare(i, 2, "<?") == 0) {
      const size_t end = doc.find("?>", i);
      if (end == std::string::npos) return "unterminated processing instruction";
      i = end + 2;
      continue;
    }
    // find the '>' that ends the tag, outside quoted attribute values
    size_t end = i + 1;
    char quote = 0;
    for (; end < doc.size(); ++end) {
      const char d = doc[end];
      if (quote) {
        if (d == quote)
          quote = 0;
        else if (d == '<')
          return "'<' in an attribute value";
      } else if (d == '"' || d == '\'') {
        quote = d;
      } else if (d == '>') {
        break;
      } else if (d == '<') {
        return "'<' inside a tag";
      }
    }
    if (end >= doc.size()) return "unterminated tag";
    std::string tag = doc.substr(i + 1, end - i - 1);
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      open.pop_back();
    } else {
      const bool self_closing = !tag.empty() && tag.back() == '/';
      const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
      if (name.empty()) return "tag without a name";
      if (open.empty() && seen_root) return "second root <" + name + ">";
      seen_root = true;
      if (!self_closing) open.push_back(name);
    }
    i = end + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (!seen_root) return "no root element";
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Every tag that starts with `prefix`, e.g. "<rect class=\"cell\"", up to its '>'.
std::vector<std::string> tags(const std::string& doc, const std::string& prefix) {
  std::vector<std::string> out;
  for (size_t at = doc.find(prefix); at != std::string::npos; at = doc.find(prefix, at + 1))
    out.push_back(doc.substr(at, doc.find('>', at) - at + 1));
  return out;
}

std::string attribute(const std::string& tag, const std::string& name) {
  const size_t at = tag.find(" " + name + "=\"");
  if (at == std::string::npos) return "";
  const size_t begin = at + name.size() + 3;
  return tag.substr(begin, tag.find('"', begin) - begin);
}

struct Xy {
  double x, y;
};

std::vector<Xy> polyline_points(const std::string& tag) {
  std::vector<Xy> out;
  const std::string points = attribute(tag, "points");
  size_t at = 0;
  while (at < points.size()) {
    size_t end = points.find(' ', at);
    if (end == std::string::npos) end = points.size();
    const std::string pair = points.substr(at, end - at);
    const size_t comma = pair.find(',');
    out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
    at = end + 1;
  }
  return out;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

LinePlot two_paths() {
  LinePlot plot;
  plot.title = "all-reduce time";
  plot.x_label = "message size";
  plot.y_label = "time";
  plot.x_unit = AxisUnit::Bytes;
  plot.y_unit = AxisUnit::Microseconds;
  plot.series = {{"Ring/LL", {{1024, 10}, {65536, 40}, {1 << 20, 300}}},
                 {"Tree/Simple", {{1024, 20}, {65536, 30}, {1 << 20, 250}}}};
  return plot;
}

HeatMap matrix(size_t rows, size_t cols, double fill = 1) {
  HeatMap map;
  map.title = "EP send matrix";
  map.row_label = "source rank";
  map.col_label = "destination rank";
  map.value_unit = "MiB";
  map.values.assign(rows, std::vector<double>(cols, fill));
  for (size_t r = 0; r < rows; ++r)
    map.row_ticks.push_back(std::to_string(r));
  for (size_t c = 0; c < cols; ++c)
    map.col_ticks.push_back(std::to_string(c));
  return map;
}

}  // namespace

TEST(XmlCheck, RejectsUnbalancedTagsBadEntitiesAndStrayText) {
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<svg><g></g></svg>\n"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\"?>\n<svg><g></svg>\n"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\"?>\n<svg><text>a & b</text></svg>\n"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\"?>\n<svg a=\"<\"/>\n"), "");
  EXPECT_NE(xml_problem("<?xml version=\"1.0\"?>\n<svg/>x"), "");
}

TEST(XmlEscape, EscapesTheFiveSpecialCharactersAndDropsControlCharacters) {
  EXPECT_EQ(xml_escape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(xml_escape(std::string("x\x01y\tz")), "xy\tz");
}

TEST(LinePlot, IsAStandaloneSvgDocument) {
  const std::string svg = render_line_plot_svg(two_paths());
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_TRUE(contains(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(contains(svg, " viewBox=\"0 0 "));
}

TEST(LinePlot, DrawsOnePolylinePerSeriesWithData) {
  LinePlot plot = two_paths();
  plot.series.push_back({"empty", {}});
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<circle class=\"marker\""), 6u);
}

TEST(LinePlot, ListsEverySeriesInTheLegend) {
  LinePlot plot = two_paths();
  plot.series.push_back({"NVLS", {{kNaN, 1}}});
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(count(svg, "<g class=\"legend-entry\">"), 3u);
  EXPECT_TRUE(contains(svg, ">Ring/LL</text>"));
  EXPECT_TRUE(contains(svg, ">Tree/Simple</text>"));
  EXPECT_TRUE(contains(svg, ">NVLS (no data)</text>"));
}

TEST(LinePlot, PlacesTenMidwayBetweenOneAndAHundredOnBothAxes) {
  LinePlot plot;
  plot.series = {{"s", {{1, 1}, {10, 10}, {100, 100}}}};
  const std::string svg = render_line_plot_svg(plot);
  const auto lines = tags(svg, "<polyline");
  ASSERT_EQ(lines.size(), 1u);
  const std::vector<Xy> p = polyline_points(lines[0]);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_GT(p[1].x - p[0].x, 100);  // spread out, not collapsed onto one pixel
  EXPECT_NEAR(p[1].x - p[0].x, p[2].x - p[1].x, 0.02);
  EXPECT_NEAR(p[0].y - p[1].y, p[1].y - p[2].y, 0.02);
  EXPECT_LT(p[2].y, p[0].y);  // larger values drawn higher
}

TEST(LinePlot, BytesAxisHasTicksAtPowersOfTwoLabelledAsBinarySizes) {
  const std::string svg = render_line_plot_svg(two_paths());
  EXPECT_TRUE(contains(svg, "class=\"tick\">1 KiB</text>"));
  EXPECT_TRUE(contains(svg, "class=\"tick\">2 KiB</text>"));
  EXPECT_TRUE(contains(svg, "class=\"tick\">512 KiB</text>"));
  EXPECT_TRUE(contains(svg, "class=\"tick\">1 MiB</text>"));
  EXPECT_FALSE(contains(svg, ">1000</text>"));
}

TEST(LinePlot, BytesAxisThinsTicksButKeepsUnitBoundariesOverAWideRange) {
  LinePlot plot = two_paths();
  plot.series = {{"wide", {{8, 1}, {8.0 * (1u << 30), 1000}}}};  // 8 B .. 8 GiB
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_TRUE(contains(svg, ">1 KiB</text>"));
  EXPECT_TRUE(contains(svg, ">1 MiB</text>"));
  EXPECT_TRUE(contains(svg, ">1 GiB</text>"));
  EXPECT_LE(count(svg, "text-anchor=\"middle\" class=\"tick\""), 13u);  // x ticks, thinned
}

TEST(LinePlot, MicrosecondAxisLabelsDecadesWithReadableUnits) {
  LinePlot plot;
  plot.y_unit = AxisUnit::Microseconds;
  plot.series = {{"s", {{1, 0.5}, {10, 2000}}}};
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_TRUE(contains(svg, ">100 ns</text>"));
  EXPECT_TRUE(contains(svg, ">1 us</text>"));
  EXPECT_TRUE(contains(svg, ">10 us</text>"));
  EXPECT_TRUE(contains(svg, ">1 ms</text>"));
  EXPECT_TRUE(contains(svg, ">10 ms</text>"));
}

TEST(LinePlot, PlainAxisLabelsDecadesAsNumbers) {
  LinePlot plot;
  plot.series = {{"s", {{0.1, 1}, {1000, 1}}}};
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_TRUE(contains(svg, "class=\"tick\">0.1</text>"));
  EXPECT_TRUE(contains(svg, "class=\"tick\">1000</text>"));
}

TEST(LinePlot, EscapesSeriesNamesAndTitles) {
  LinePlot plot = two_paths();
  plot.title = "a < b";
  plot.series[0].name = "Ring/LL <default> & \"x\"";
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_TRUE(contains(svg, ">Ring/LL &lt;default&gt; &amp; &quot;x&quot;</text>"));
  EXPECT_TRUE(contains(svg, "<title>a &lt; b</title>"));
  EXPECT_FALSE(contains(svg, "<default>"));
}

TEST(LinePlot, DropsNonPositiveAndNonFinitePoints) {
  LinePlot plot;
  plot.series = {{"s", {{1, 1}, {0, 5}, {-3, 5}, {10, 0}, {kNaN, 2}, {20, kInf}, {100, 100}}}};
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<circle class=\"marker\""), 2u);
  EXPECT_EQ(polyline_points(tags(svg, "<polyline")[0]).size(), 2u);
  EXPECT_FALSE(contains(svg, "nan"));
  EXPECT_FALSE(contains(svg, "inf"));
}

TEST(LinePlot, SeriesWithOnlyInvalidPointsIsListedAsNoDataAndNotDrawn) {
  LinePlot plot = two_paths();
  plot.series.push_back({"CollNet", {{0, 0}, {kNaN, kNaN}}});
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_TRUE(contains(svg, ">CollNet (no data)</text>"));
}

TEST(LinePlot, PlotWithNoDataAtAllIsStillWellFormed) {
  LinePlot plot;
  plot.series = {{"a", {}}, {"b", {{-1, -1}}}};
  const std::string svg = render_line_plot_svg(plot);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline"), 0u);
  EXPECT_EQ(count(svg, "(no data)"), 2u);
  EXPECT_EQ(xml_problem(render_line_plot_svg(LinePlot{})), "");
}

TEST(LinePlot, NinthSeriesRepeatsTheFirstColourWithADash) {
  LinePlot plot;
  for (int i = 0; i < 9; ++i)
    plot.series.push_back({"s" + std::to_string(i), {{1, 1.0 + i}, {10, 2.0 + i}}});
  const auto lines = tags(render_line_plot_svg(plot), "<polyline");
  ASSERT_EQ(lines.size(), 9u);
  for (int i = 1; i < 8; ++i)
    EXPECT_NE(attribute(lines[i], "stroke"), attribute(lines[0], "stroke")) << i;
  EXPECT_EQ(attribute(lines[8], "stroke"), attribute(lines[0], "stroke"));
  EXPECT_EQ(attribute(lines[0], "stroke-dasharray"), "");
  EXPECT_NE(attribute(lines[8], "stroke-dasharray"), "");
}

TEST(LinePlot, SameInputGivesByteIdenticalOutput) {
  EXPECT_EQ(render_line_plot_svg(two_paths()), render_line_plot_svg(two_paths()));
}

TEST(HeatMap, DrawsOneRectPerCellOfANonSquareMatrix) {
  const std::string svg = render_heat_map_svg(matrix(3, 5));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 15u);
}

TEST(HeatMap, MaxCellTakesTheLastColourStopAndZeroTheFirst) {
  HeatMap map = matrix(2, 2, 0);
  map.values[1][0] = 7;
  map.values[0][1] = 3.5;
  const auto cells = tags(render_heat_map_svg(map), "<rect class=\"cell\"");
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(attribute(cells[0], "fill"), sequential_colour(0));
  EXPECT_EQ(attribute(cells[2], "fill"), "#fde725");
  EXPECT_NE(attribute(cells[0], "fill"), attribute(cells[2], "fill"));
  EXPECT_NE(attribute(cells[1], "fill"), attribute(cells[0], "fill"));
  EXPECT_NE(attribute(cells[1], "fill"), attribute(cells[2], "fill"));
}

TEST(HeatMap, AllZeroMatrixDrawsEveryCellInTheFirstColour) {
  const std::string svg = render_heat_map_svg(matrix(4, 4, 0));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_FALSE(contains(svg, "nan"));
  for (const std::string& cell : tags(svg, "<rect class=\"cell\""))
    EXPECT_EQ(attribute(cell, "fill"), "#440154");
}

TEST(HeatMap, CellTooltipNamesSourceDestinationValueAndUnit) {
  HeatMap map = matrix(3, 3);
  map.values[1][2] = 5;
  const std::string svg = render_heat_map_svg(map);
  EXPECT_TRUE(contains(svg, "<title>src 1 -&gt; dst 2: 5.00 MiB</title>"));
  EXPECT_EQ(count(svg, "<title>src "), 9u);
}

TEST(HeatMap, PrintsValuesInCellsOnlyUpTo16By16) {
  EXPECT_EQ(count(render_heat_map_svg(matrix(16, 16)), "class=\"cell-value\""), 256u);
  EXPECT_EQ(count(render_heat_map_svg(matrix(16, 17)), "class=\"cell-value\""), 0u);
  const std::string big = render_heat_map_svg(matrix(17, 17));
  EXPECT_EQ(xml_problem(big), "");
  EXPECT_EQ(count(big, "class=\"cell-value\""), 0u);
  EXPECT_EQ(count(big, "<rect class=\"cell\""), 289u);
}

TEST(HeatMap, ColourBarIsLabelledFromZeroToTheMaximum) {
  HeatMap map = matrix(2, 2);
  map.values[0][0] = 12.5;
  const std::string svg = render_heat_map_svg(map);
  EXPECT_TRUE(contains(svg, "class=\"scale-max\">12.50 MiB</text>"));
  EXPECT_TRUE(contains(svg, "class=\"scale-min\">0 MiB</text>"));
  EXPECT_TRUE(contains(svg, "fill=\"url(#heat-scale)\""));
}

TEST(HeatMap, MissingAndNonFiniteCellsAreGreyNoData) {
  HeatMap map = matrix(2, 2);
  map.values[0][1] = kNaN;
  map.values[1].pop_back();  // ragged
  const std::string svg = render_heat_map_svg(map);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 4u);
  EXPECT_EQ(count(svg, ": no data</title>"), 2u);
  EXPECT_FALSE(contains(svg, "nan"));
}

TEST(HeatMap, EmptyMatrixIsStillWellFormed) {
  const std::string svg = render_heat_map_svg(matrix(0, 0));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 0u);
}

TEST(HeatMap, EscapesLabelsAndTicks) {
  HeatMap map = matrix(2, 2);
  map.title = "send <MiB> & 'bytes'";
  map.row_ticks = {"r<0>", "r&1"};
  const std::string svg = render_heat_map_svg(map);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_TRUE(contains(svg, "send &lt;MiB&gt; &amp; &apos;bytes&apos;"));
  EXPECT_TRUE(contains(svg, "src r&amp;1 -&gt; dst 0"));
}

TEST(HeatMap, SameInputGivesByteIdenticalOutput) {
  HeatMap map = matrix(5, 3);
  map.values[2][1] = 1.0 / 3.0;
  EXPECT_EQ(render_heat_map_svg(map), render_heat_map_svg(map));
}

TEST(SequentialColour, ClampsOutOfRangeAndNaN) {
  EXPECT_EQ(sequential_colour(-1), "#440154");
  EXPECT_EQ(sequential_colour(kNaN), "#440154");
  EXPECT_EQ(sequential_colour(2), "#fde725");
  EXPECT_EQ(sequential_colour(0.5), "#21918c");
}

TEST(LinePlot, MarkersTakeTheColourOfTheirLine) {
  const std::string svg = render_line_plot_svg(two_paths());
  const auto lines = tags(svg, "<polyline");
  const auto markers = tags(svg, "<circle class=\"marker\"");
  ASSERT_EQ(lines.size(), 2u);
  ASSERT_EQ(markers.size(), 6u);
  EXPECT_EQ(attribute(markers[0], "fill"), attribute(lines[0], "stroke"));
  EXPECT_EQ(attribute(markers[5], "fill"), attribute(lines[1], "stroke"));
}

namespace {

// The document's width attribute and the text of its title lines (font-size 16).
struct TitleLayout {
  double width = 0;
  std::vector<std::string> lines;
};

TitleLayout title_layout(const std::string& svg) {
  TitleLayout t;
  const size_t w = svg.find(" width=\"");
  t.width = std::stod(svg.substr(w + 8));
  const std::string open = "font-size=\"16\">";
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const size_t start = at + open.size();
    t.lines.push_back(svg.substr(start, svg.find("</text>", start) - start));
  }
  return t;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines)
    out += (out.empty() ? "" : " ") + l;
  return out;
}

}  // namespace

// The title is drawn at 16 px: by the renderer's own estimate every line of it must fit the
// document, and together the lines must say the whole title.
TEST(SvgPlot, HeatMapTitleFitsTheDocumentByTheRenderersEstimate) {
  for (const std::string& title :
       {std::string("diagnose ep: dispatch bytes, generated, skew uniform, seed 1 (8 ranks)"),
        std::string("diagnose ep: dispatch bytes, file /data/models/deepseek-v3/routing/"
                    "layer-counts-from-a-long-evaluation-run.json, layer 3 (2 ranks)"),
        std::string("short")}) {
    HeatMap map;
    map.title = title;
    map.values = {{1, 2}, {3, 4}};
    const TitleLayout t = title_layout(render_heat_map_svg(map));
    ASSERT_FALSE(t.lines.empty()) << title;
    for (const std::string& line : t.lines)
      EXPECT_LE(estimated_text_width(line, 16), t.width) << line << " in " << t.width << " px";
    // Broken only at spaces, or inside a word too long for a line (the path).
    std::string words = joined(t.lines);
    std::erase(words, ' ');
    std::string expected = title;
    std::erase(expected, ' ');
    EXPECT_EQ(words, expected);
  }
}

TEST(SvgPlot, AShortTitleStaysOnOneLineAndALongOneMovesThePlotDown) {
  HeatMap map;
  map.values = {{1}};
  map.title = "short";
  const std::string one = render_heat_map_svg(map);
  EXPECT_EQ(title_layout(one).lines.size(), 1u);
  map.title = std::string(200, 'a') + " " + std::string(10, 'b');
  const std::string many = render_heat_map_svg(map);
  EXPECT_GT(title_layout(many).lines.size(), 1u);
  // The first cell starts below the last title line.
  const size_t cell = many.find("class=\"cell\"");
  ASSERT_NE(cell, std::string::npos);
  const double y = std::stod(many.substr(many.find(" y=\"", cell) + 4));
  EXPECT_GT(y, 28 + 20 * static_cast<double>(title_layout(many).lines.size() - 1));
}

TEST(SvgPlot, LinePlotTitleFitsToo) {
  LinePlot plot;
  plot.title =
      std::string("diagnose allreduce: time per call against size, every path, float32, ") +
      "8 ranks on 8 GPUs, NCCL 2.28.9, each setting in fresh workers";
  plot.series = {{"NCCL default", {{1024, 10}, {2048, 12}}}};
  const TitleLayout t = title_layout(render_line_plot_svg(plot));
  for (const std::string& line : t.lines)
    EXPECT_LE(estimated_text_width(line, 16), t.width) << line;
}
