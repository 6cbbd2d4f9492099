#include "probes/base/pickle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "probes/base/error.hpp"

namespace commtool::pickle {

// A value the pickle built, in 24 bytes (a 2,000-entry dump holds 120,000). Containers hold the
// indexes of their items, so that a memoised container that is filled later is seen filled
// wherever it is referenced. Text is `count` bytes of the pickle from `text_at`.
struct Document::Node {
  enum Kind : uint8_t { kNone, kBool, kInt, kUint, kDouble, kText, kList, kTuple, kDict };
  Kind kind = kNone;
  union {
    int64_t integer = 0;  // kInt
    uint64_t uint;        // kUint: a non-negative int (up to 2^64 - 1)
    double real;
    bool boolean;
    uint32_t text_at;  // kText: where its bytes start in the pickle
    // A container's items (kDict: key, value, key, value ...): `count` of them from `first` in
    // the document's one array of items, with room for `room` there before the next one's.
    uint32_t first;
  };
  uint32_t count = 0;  // a container's items, a text's bytes
  uint32_t room = 0;
};

namespace {

using nlohmann::json;
using Node = Document::Node;

class Machine {
 public:
  Machine(std::string_view bytes, const PickleLimits& limits) : in_(bytes), limits_(limits) {
    if (bytes.size() > UINT32_MAX)
      fail(0, "a pickle over 4 GiB (its values are counted in 32 bits)");
    // A Flight Recorder dump holds a value per 3 bytes: room for them at once, rather than
    // moving every value each time the vector grows.
    nodes_.reserve(std::min<uint64_t>(bytes.size() / 3 + 1, limits.max_values));
  }

  // Runs the pickle to its STOP; the value it returns.
  uint32_t execute() {
    for (;;) {
      const size_t at = pos_;
      const auto op = static_cast<unsigned char>(take(1)[0]);
      if (step(op, at)) break;
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      fail(pos_, fmt::format("STOP with {} values on the stack (one expected)", stack_.size()));
    }
    return stack_.back();
  }

  json run() {
    const uint32_t root = execute();
    uint64_t emitted = 0;
    return to_json(root, 0, emitted);
  }

  std::vector<Node> take_nodes() { return std::move(nodes_); }
  std::vector<uint32_t> take_items() { return std::move(items_); }

 private:
  [[noreturn]] void fail(size_t at, const std::string& why) const {
    throw usage_error(fmt::format("pickle byte {}: {}", at, why));
  }

  std::string_view take(size_t n) {
    if (n > in_.size() - pos_) fail(pos_, fmt::format("cut off ({} more bytes expected)", n));
    std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  uint64_t little(size_t n) {
    const std::string_view b = take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
    return v;
  }

  uint32_t add(Node n) {
    if (nodes_.size() >= limits_.max_values) {
      fail(pos_, fmt::format("more than {} values", limits_.max_values));
    }
    nodes_.push_back(std::move(n));
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  void push(Node n) { stack_.push_back(add(std::move(n))); }
  void push_none() { push({}); }
  void push_bool(bool b) {
    Node n;
    n.kind = Node::kBool;
    n.boolean = b;
    push(std::move(n));
  }
  void push_int(int64_t v) {
    Node n;
    n.kind = Node::kInt;
    n.integer = v;
    push(std::move(n));
  }
  void push_uint(uint64_t v) {
    Node n;
    n.kind = Node::kUint;
    n.uint = v;
    push(std::move(n));
  }
  void push_real(double d) {
    Node n;
    n.kind = Node::kDouble;
    n.real = d;
    push(std::move(n));
  }
  void push_container(Node::Kind k) {
    Node n;
    n.kind = k;
    push(std::move(n));
  }

  uint32_t pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      fail(at, "a value was taken from an empty stack");
    }
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top(size_t at) const {
    if (stack_.empty()) fail(at, "the stack is empty");
    return stack_.back();
  }
  // APPENDS, SETITEMS: the values above the last MARK into the container below it.
  void move_since_mark(Node::Kind kind, size_t at, const char* op) {
    if (marks_.empty()) fail(at, "no MARK to take values to");
    const size_t m = marks_.back();
    if (m == 0) fail(at, fmt::format("{} with no container below its MARK", op));
    const size_t count = stack_.size() - m;
    if (kind == Node::kDict && count % 2 != 0) fail(at, "SETITEMS with a key and no value");
    Node& n = container(stack_[m - 1], kind, at, op);
    append(n, stack_.data() + m, count);
    stack_.resize(m);
    marks_.pop_back();
  }
  // The values above the last MARK, taken off with it.
  std::vector<uint32_t> since_mark(size_t at) {
    if (marks_.empty()) fail(at, "no MARK to take values to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> out(stack_.begin() + static_cast<ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  Node& container(uint32_t id, Node::Kind kind, size_t at, const char* op) {
    Node& n = nodes_[id];
    if (n.kind != kind)
      fail(at, fmt::format("{} on a value that is not a {}", op,
                           kind == Node::kDict ? "dict" : "list"));
    return n;
  }
  void add_items(Node& n, const std::vector<uint32_t>& items) {
    append(n, items.data(), items.size());
  }
  // Items into a container: into its room; or, when its items end the array, grown in place;
  // else moved to the end with room for as many again, so that appending one item at a time
  // (APPEND) costs amortised constant time and the array stays within three times its items.
  void append(Node& n, const uint32_t* items, size_t k) {
    if (n.count + k > limits_.max_values) {
      fail(pos_, fmt::format("more than {} values", limits_.max_values));
    }
    const auto count = static_cast<uint32_t>(k);
    if (n.room == 0) n.first = static_cast<uint32_t>(items_.size());  // its first items: at the end
    if (n.count + count <= n.room) {
      std::copy(items, items + k, items_.begin() + n.first + n.count);
    } else if (n.first + n.room == items_.size()) {
      check_items(n.count + count - n.room);
      items_.resize(n.first + n.count + count);
      std::copy(items, items + k, items_.begin() + n.first + n.count);
      n.room = n.count + count;
    } else {
      const uint32_t room = std::max<uint32_t>(2 * (n.count + count), 4);
      check_items(room);
      const auto first = static_cast<uint32_t>(items_.size());
      items_.resize(items_.size() + room);
      std::copy(items_.begin() + n.first, items_.begin() + n.first + n.count,
                items_.begin() + first);
      std::copy(items, items + k, items_.begin() + first + n.count);
      n.first = first;
      n.room = room;
    }
    n.count += count;
  }
  void check_items(uint64_t more) {
    if (items_.size() + more > 4 * limits_.max_values) {
      fail(pos_, fmt::format("more than {} items in containers", 4 * limits_.max_values));
    }
  }
  void memo_put(uint64_t key, size_t at) {
    if (key >= limits_.max_memo) fail(at, fmt::format("memo index {} is too large", key));
    if (memo_.size() <= key) memo_.resize(key + 1, UINT32_MAX);
    memo_[key] = top(at);
  }
  void memo_get(uint64_t key, size_t at) {
    if (key >= memo_.size() || memo_[key] == UINT32_MAX) {
      fail(at, fmt::format("memo index {} was never stored", key));
    }
    stack_.push_back(memo_[key]);
  }
  void text(std::string_view s) {
    Node n;
    n.kind = Node::kText;
    n.text_at = static_cast<uint32_t>(s.data() - in_.data());
    n.count = static_cast<uint32_t>(s.size());
    push(std::move(n));
  }
  void integer(uint64_t n, bool negative) {
    if (negative) {
      push_int(static_cast<int64_t>(n));
    } else {
      push_uint(n);
    }
  }
  // LONG1/LONG4: little-endian two's complement of n bytes.
  void long_int(size_t n, size_t at) {
    if (n > 8) fail(at, fmt::format("an integer of {} bytes (at most 8 are read)", n));
    if (n == 0) return push_uint(0);
    const uint64_t raw = little(n);
    const bool negative = (raw >> (8 * n - 1)) & 1;
    if (n == 8) {
      if (negative) return push_int(static_cast<int64_t>(raw));
      return push_uint(raw);
    }
    const uint64_t v = negative ? raw | (~uint64_t{0} << (8 * n)) : raw;
    integer(v, negative);
  }

  // Runs one opcode; true at STOP.
  bool step(unsigned char op, size_t at) {
    switch (op) {
      case 0x80:  // PROTO
        if (static_cast<unsigned char>(take(1)[0]) > 5) fail(at, "a protocol above 5");
        return false;
      case 0x95:  // FRAME: a length hint
        take(8);
        return false;
      case '.':  // STOP
        return true;
      case '(':  // MARK
        if (marks_.size() >= static_cast<size_t>(limits_.max_depth) * 4) {
          fail(at, "MARKs nested too deep");
        }
        marks_.push_back(stack_.size());
        return false;
      case '}':
        push_container(Node::kDict);
        return false;
      case ']':
        push_container(Node::kList);
        return false;
      case ')':
        push_container(Node::kTuple);
        return false;
      case 0x8f:  // EMPTY_SET: as a list
        push_container(Node::kList);
        return false;
      case 't': {  // TUPLE
        const std::vector<uint32_t> items = since_mark(at);
        push_container(Node::kTuple);
        add_items(nodes_[stack_.back()], items);
        return false;
      }
      case 0x91: {  // FROZENSET
        const std::vector<uint32_t> items = since_mark(at);
        push_container(Node::kList);
        add_items(nodes_[stack_.back()], items);
        return false;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84;
        std::vector<uint32_t> items(n);
        for (size_t i = n; i > 0; --i)
          items[i - 1] = pop(at);
        push_container(Node::kTuple);
        add_items(nodes_[stack_.back()], items);
        return false;
      }
      case 'a': {  // APPEND
        const uint32_t v = pop(at);
        add_items(container(top(at), Node::kList, at, "APPEND"), {v});
        return false;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        move_since_mark(Node::kList, at, "APPENDS");
        return false;
      }
      case 's': {  // SETITEM
        const uint32_t v = pop(at);
        const uint32_t k = pop(at);
        add_items(container(top(at), Node::kDict, at, "SETITEM"), {k, v});
        return false;
      }
      case 'u': {  // SETITEMS
        move_since_mark(Node::kDict, at, "SETITEMS");
        return false;
      }
      case 'X':
        text(take(little(4)));
        return false;
      case 0x8c:
        text(take(little(1)));
        return false;
      case 0x8d:
        text(take(little(8)));
        return false;
      case 'C':  // SHORT_BINBYTES, and the other byte strings: as text
      case 'U':
        text(take(little(1)));
        return false;
      case 'B':
      case 'T':
        text(take(little(4)));
        return false;
      case 0x8e:
        text(take(little(8)));
        return false;
      case 'J': {
        const auto v = static_cast<int32_t>(static_cast<uint32_t>(little(4)));
        push_int(v);
        return false;
      }
      case 'K':
        push_uint(little(1));
        return false;
      case 'M':
        push_uint(little(2));
        return false;
      case 0x8a:
        long_int(little(1), at);
        return false;
      case 0x8b:
        long_int(little(4), at);
        return false;
      case 'N':
        push_none();
        return false;
      case 0x88:
        push_bool(true);
        return false;
      case 0x89:
        push_bool(false);
        return false;
      case 'G': {
        const std::string_view b = take(8);
        uint64_t bits = 0;
        for (size_t i = 0; i < 8; ++i)
          bits = (bits << 8) | static_cast<unsigned char>(b[i]);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        push_real(d);
        return false;
      }
      case 'q':
        memo_put(little(1), at);
        return false;
      case 'r':
        memo_put(little(4), at);
        return false;
      case 0x94:
        memo_put(memo_.size(), at);
        return false;
      case 'h':
        memo_get(little(1), at);
        return false;
      case 'j':
        memo_get(little(4), at);
        return false;
      case '0':
        pop(at);
        return false;
      case '2':
        stack_.push_back(top(at));
        return false;
      case '1':
        since_mark(at);
        return false;
      case 'c':
      case 0x93:
      case 'R':
      case 'b':
      case 0x81:
      case 0x92:
      case 'i':
      case 'o':
      case 0x82:
      case 0x83:
      case 0x84:
      case 'P':
      case 'Q':
        fail(at, fmt::format("opcode 0x{:02x} would import or call code: refused, never run", op));
      default:
        fail(at, fmt::format("opcode 0x{:02x} is not one a data dump uses", op));
    }
  }

  json to_json(uint32_t id, int depth, uint64_t& emitted) const {
    if (depth > limits_.max_depth) {
      fail(pos_, fmt::format("values nested deeper than {}", limits_.max_depth));
    }
    if (++emitted > limits_.max_values) {
      fail(pos_,
           fmt::format("more than {} values once shared ones are copied", limits_.max_values));
    }
    const Node& n = nodes_[id];
    switch (n.kind) {
      case Node::kNone:
        return nullptr;
      case Node::kBool:
        return n.boolean;
      case Node::kInt:
        return n.integer;
      case Node::kUint:
        return n.uint;
      case Node::kDouble:
        return n.real;
      case Node::kText:
        return std::string(in_.substr(n.text_at, n.count));
      case Node::kList:
      case Node::kTuple: {
        json out = json::array();
        for (uint32_t i = 0; i < n.count; ++i)
          out.push_back(to_json(items_[n.first + i], depth + 1, emitted));
        return out;
      }
      case Node::kDict: {
        json out = json::object();
        for (uint32_t i = 0; i + 1 < n.count; i += 2) {
          json key = to_json(items_[n.first + i], depth + 1, emitted);
          std::string k = key.is_string()
                              ? key.get<std::string>()
                              : key.dump(-1, ' ', false, json::error_handler_t::replace);
          out[k] = to_json(items_[n.first + i + 1], depth + 1, emitted);
        }
        return out;
      }
    }
    return nullptr;
  }

  std::string_view in_;
  PickleLimits limits_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
  std::vector<uint32_t> items_;  // every container's items (Node::first, count, room)
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::vector<uint32_t> memo_;
};

}  // namespace

json load(std::string_view bytes, const PickleLimits& limits) {
  return Machine(bytes, limits).run();
}

Document Document::parse(std::string bytes, const PickleLimits& limits) {
  Document d;
  d.bytes_ = std::make_shared<const std::string>(std::move(bytes));
  Machine m(*d.bytes_, limits);
  d.root_ = m.execute();
  d.nodes_ = std::make_shared<const std::vector<Node>>(m.take_nodes());
  d.items_ = std::make_shared<const std::vector<uint32_t>>(m.take_items());
  return d;
}

bool Value::is_dict() const {
  return valid() && (*doc_->nodes_)[id_].kind == Node::kDict;
}

bool Value::is_list() const {
  if (!valid()) return false;
  const Node::Kind k = (*doc_->nodes_)[id_].kind;
  return k == Node::kList || k == Node::kTuple;
}

size_t Value::size() const {
  if (is_list()) return (*doc_->nodes_)[id_].count;
  if (is_dict()) return (*doc_->nodes_)[id_].count / 2;
  return 0;
}

Value Value::operator[](size_t i) const {
  if (!is_list()) return {};
  const Node& n = (*doc_->nodes_)[id_];
  return i < n.count ? Value(doc_, (*doc_->items_)[n.first + i]) : Value();
}

Value Value::key(size_t i) const {
  if (!is_dict()) return {};
  const Node& n = (*doc_->nodes_)[id_];
  return 2 * i + 1 < n.count ? Value(doc_, (*doc_->items_)[n.first + 2 * i]) : Value();
}

Value Value::value(size_t i) const {
  if (!is_dict()) return {};
  const Node& n = (*doc_->nodes_)[id_];
  return 2 * i + 1 < n.count ? Value(doc_, (*doc_->items_)[n.first + 2 * i + 1]) : Value();
}

Value Value::find(std::string_view key) const {
  if (!is_dict()) return {};
  const std::vector<Node>& nodes = *doc_->nodes_;
  const Node& n = nodes[id_];
  const uint32_t* items = doc_->items_->data() + n.first;
  // The last SETITEM of a key is its value, as in Python.
  for (uint32_t i = n.count / 2; i > 0; --i) {
    const Node& k = nodes[items[2 * i - 2]];
    if (k.kind == Node::kText && k.count == key.size() &&
        std::memcmp(doc_->bytes_->data() + k.text_at, key.data(), key.size()) == 0) {
      return {doc_, items[2 * i - 1]};
    }
  }
  return {};
}

std::optional<std::string_view> Value::text() const {
  if (!valid() || (*doc_->nodes_)[id_].kind != Node::kText) return std::nullopt;
  const Node& n = (*doc_->nodes_)[id_];
  return std::string_view(doc_->bytes_->data() + n.text_at, n.count);
}

std::optional<int64_t> Value::integer() const {
  if (!valid()) return std::nullopt;
  const Node& n = (*doc_->nodes_)[id_];
  if (n.kind == Node::kInt) return n.integer;
  if (n.kind == Node::kUint && n.uint <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(n.uint);
  }
  return std::nullopt;
}

std::optional<uint64_t> Value::unsigned_integer() const {
  if (!valid()) return std::nullopt;
  const Node& n = (*doc_->nodes_)[id_];
  if (n.kind == Node::kUint) return n.uint;
  if (n.kind == Node::kInt && n.integer >= 0) return static_cast<uint64_t>(n.integer);
  return std::nullopt;
}

std::optional<bool> Value::boolean() const {
  if (!valid() || (*doc_->nodes_)[id_].kind != Node::kBool) return std::nullopt;
  return (*doc_->nodes_)[id_].boolean;
}

}  // namespace commtool::pickle
