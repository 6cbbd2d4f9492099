#include "probes/topo/xml.hpp"

#include <charconv>
#include <cstdint>

#include "probes/base/error.hpp"

namespace commtool::topo::xml {

const std::string* Element::attribute(std::string_view key) const {
  for (const auto& [k, v] : attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
// XML names are wider than ASCII; any byte of a UTF-8 sequence is accepted as a name byte.
bool is_name_start(char c) {
  return is_letter(c) || c == '_' || c == ':' || (c & 0x80) != 0;
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c) || c == '-' || c == '.';
}

// XML 1.0 section 2.2: the characters a document may contain.
bool is_xml_char(uint32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
    return;
  }
  // Lead byte marks the length (110xxxxx, 1110xxxx, 11110xxx); continuation bytes are 10xxxxxx.
  int continuation = cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
  uint32_t lead_mark = continuation == 1 ? 0xC0 : continuation == 2 ? 0xE0 : 0xF0;
  out += static_cast<char>(lead_mark | (cp >> (6 * continuation)));
  for (int i = continuation - 1; i >= 0; --i) {
    out += static_cast<char>(0x80 | ((cp >> (6 * i)) & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  Element parse_document() {
    if (starts_with("\xEF\xBB\xBF")) pos_ += 3;  // a UTF-8 byte order mark
    skip_space();
    if (starts_with("<?xml") && pos_ + 5 < text_.size() &&
        (is_space(text_[pos_ + 5]) || text_[pos_ + 5] == '?')) {
      skip_past("?>", "the <?xml ...?> declaration", line_);
    }
    skip_space_and_comments();
    if (at_end()) fail(here(), "empty document: expected a root element");
    if (peek() != '<') fail(here(), "expected '<' to open the root element, found " + found());
    Element root = parse_element(1);
    skip_space_and_comments();
    if (!at_end()) {
      fail(here(), "unexpected " + found() + " after the root element <" + root.name +
                       ">: a document has exactly one root element");
    }
    return root;
  }

 private:
  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw usage_error(source_ + ":" + std::to_string(line) + ": " + what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool starts_with(std::string_view s) const { return text_.substr(pos_).starts_with(s); }
  void advance(size_t n = 1) {
    for (; n > 0 && !at_end(); --n, ++pos_) {
      if (text_[pos_] == '\n') ++line_;
    }
  }
  // The line to blame: at the end of a file that ends with a newline, the last line of text.
  int here() const { return at_end() && line_ > 1 && text_.back() == '\n' ? line_ - 1 : line_; }
  std::string found() const {
    if (at_end()) return "end of file";
    if (peek() == '\n' || peek() == '\r') return "end of line";
    return std::string("'") + peek() + "'";
  }
  std::string not_closed(const std::string& what, int open_line) const {
    return "unexpected end of file: " + what + " opened at line " + std::to_string(open_line) +
           " is not closed";
  }

  void skip_space() {
    while (!at_end() && is_space(peek()))
      advance();
  }
  void skip_past(std::string_view terminator, const std::string& what, int open_line) {
    size_t end = text_.find(terminator, pos_);
    if (end == std::string_view::npos) {
      advance(text_.size() - pos_);
      fail(here(), not_closed(what, open_line) + " (expected " + std::string(terminator) + ")");
    }
    advance(end + terminator.size() - pos_);
  }
  void skip_space_and_comments() {
    for (skip_space(); starts_with("<!--"); skip_space()) {
      skip_past("-->", "a comment", line_);
    }
  }

  std::string parse_name(const std::string& expected) {
    if (at_end() || !is_name_start(peek()))
      fail(here(), "expected " + expected + ", found " + found());
    size_t start = pos_;
    while (!at_end() && is_name_char(peek()))
      ++pos_;  // names hold no line breaks
    return std::string(text_.substr(start, pos_ - start));
  }

  Element parse_element(int depth) {
    int open_line = line_;
    advance();  // '<'
    if (peek() == '?') {
      fail(open_line,
           "processing instructions are not supported (only an <?xml ...?> "
           "declaration at the start of the file)");
    }
    if (peek() == '!') fail(open_line, "unsupported markup '<!': only <!-- comments --> are");
    Element e;
    e.name = parse_name("an element name after '<'");
    e.line = open_line;
    if (depth > kMaxDepth) {
      fail(open_line,
           "<" + e.name + "> is nested deeper than " + std::to_string(kMaxDepth) + " elements");
    }
    for (;;) {
      bool spaced = !at_end() && is_space(peek());
      skip_space_in_tag(e);
      if (starts_with("/>")) {
        advance(2);
        return e;
      }
      if (peek() == '>') break;
      if (!spaced) {
        fail(here(),
             "expected whitespace, '>' or '/>' in the <" + e.name + "> tag, found " + found());
      }
      parse_attribute(e);
    }
    advance();  // '>'
    parse_content(e, depth);
    return e;
  }

  // A file cut short inside a tag says so, rather than naming the token it expected next.
  void skip_space_in_tag(const Element& e) {
    skip_space();
    if (at_end()) fail(here(), not_closed("the <" + e.name + "> tag", e.line));
  }

  void parse_attribute(Element& e) {
    int attr_line = line_;
    std::string key = parse_name("an attribute name in <" + e.name + ">");
    if (e.attribute(key))
      fail(attr_line, "attribute \"" + key + "\" given twice in <" + e.name + ">");
    skip_space_in_tag(e);
    if (peek() != '=')
      fail(here(), "expected '=' after attribute \"" + key + "\", found " + found());
    advance();
    skip_space_in_tag(e);
    char quote = peek();
    if (quote != '"' && quote != '\'') {
      fail(here(), "expected a quote (\" or ') to open the value of attribute \"" + key +
                       "\", found " + found());
    }
    int value_line = line_;
    advance();
    std::string value;
    for (;;) {
      if (at_end()) fail(here(), not_closed("the value of attribute \"" + key + "\"", value_line));
      char c = peek();
      if (c == quote) break;
      if (c == '<') fail(here(), "'<' in the value of attribute \"" + key + "\": write &lt;");
      if (c == '&') {
        decode_reference(value, key);
      } else {
        value += c;
        advance();
      }
    }
    advance();  // closing quote
    e.attributes.emplace_back(std::move(key), std::move(value));
  }

  // "&amp;", "&#38;", "&#x26;" at pos_: appends the character and moves past the ';'.
  void decode_reference(std::string& out, const std::string& key) {
    int ref_line = line_;
    size_t end = pos_ + 1;
    while (end < text_.size() &&
           (is_letter(text_[end]) || is_digit(text_[end]) || text_[end] == '#')) {
      ++end;
    }
    std::string_view ref = text_.substr(pos_ + 1, end - pos_ - 1);
    std::string shown = "&" + std::string(ref) + ";";
    if (end >= text_.size() || text_[end] != ';') {
      fail(ref_line, "'&' in the value of attribute \"" + key +
                         "\" does not start a reference such as &amp; (missing ';')");
    }
    advance(end + 1 - pos_);
    static constexpr std::pair<std::string_view, char> kNamed[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    for (const auto& [name, c] : kNamed) {
      if (ref == name) {
        out += c;
        return;
      }
    }
    if (ref.starts_with('#')) {
      bool hex = ref.size() > 1 && ref[1] == 'x';
      std::string_view digits = ref.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      auto [ptr, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (!digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() &&
          is_xml_char(cp)) {
        append_utf8(out, cp);
        return;
      }
      fail(ref_line,
           "character reference " + shown + ": expected a valid character such as &#38; or &#x26;");
    }
    fail(ref_line, "unknown entity " + shown +
                       ": expected &amp; &lt; &gt; &quot; &apos; or a character reference");
  }

  void parse_content(Element& e, int depth) {
    for (;;) {
      size_t lt = text_.find('<', pos_);
      if (lt == std::string_view::npos) {
        advance(text_.size() - pos_);
        fail(here(), not_closed("<" + e.name + ">", e.line));
      }
      advance(lt - pos_);  // text content carries nothing commtool reads
      if (starts_with("<!--")) {
        skip_past("-->", "a comment", line_);
      } else if (starts_with("</")) {
        int close_line = line_;
        advance(2);
        std::string closing = parse_name("an element name after '</'");
        skip_space();
        if (peek() != '>') {
          fail(here(), "expected '>' to end the closing tag </" + closing + ">, found " + found());
        }
        advance();
        if (closing != e.name) {
          fail(close_line, "closing tag </" + closing + "> does not match <" + e.name +
                               "> opened at line " + std::to_string(e.line));
        }
        return;
      } else {
        e.children.push_back(parse_element(depth + 1));
      }
    }
  }
};

}  // namespace

Element parse(std::string_view text, const std::string& source_name) {
  return Parser(text, source_name).parse_document();
}

}  // namespace commtool::topo::xml
