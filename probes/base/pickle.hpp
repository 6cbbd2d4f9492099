// A reader of the data subset of Python's pickle format, as PyTorch's Flight Recorder writes its
// dumps (protocol 2; dicts, lists, tuples, str, int, float, bool, None, bytes), into JSON
// values. It never imports or calls anything: the opcodes that would (GLOBAL, STACK_GLOBAL,
// REDUCE, BUILD, NEWOBJ, INST, OBJ, EXT*, PERSID) are refused by name, as is every opcode it
// does not know. A pickle is a small program for a stack machine; this one runs it with the
// stack, the nesting, the memo and the values bounded (PickleLimits), and throws
// commtool::Error (exit 2) naming the byte offset and what was wrong, never crashing on a
// truncated or hostile file.
//
// Memo references (BINGET) share the object, as in Python, so a dict filled after it was
// memoised is seen filled; the JSON built at the end copies shared values, and the copies are
// counted against max_values, so a file of a few kB whose references double at every level
// cannot make gigabytes.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::pickle {

struct PickleLimits {
  // Values built, and values in the JSON (shared ones again): a dump of 2,000 entries holds
  // about 120,000.
  uint64_t max_values = 5'000'000;
  int max_depth = 64;              // containers inside containers
  uint64_t max_memo = 10'000'000;  // memo entries
};

// The value the pickle's STOP returns. Dict keys that are not strings become their JSON text
// (an int key 3 becomes "3"); tuples become arrays; bytes become strings (invalid UTF-8 is
// replaced when the JSON is printed); ints beyond 64 bits are refused.
nlohmann::json load(std::string_view bytes, const PickleLimits& limits = {});

class Document;

// A value of a Document: a view, as cheap to copy as a pointer, valid while its Document lives.
// A Value that is not there (a missing key, an index past the end) is !valid() and answers
// every question with "none", so a reader can chain lookups as it would with JSON.
class Value {
 public:
  bool valid() const { return doc_ != nullptr; }
  bool is_dict() const;
  bool is_list() const;                    // a list, a tuple or a set
  size_t size() const;                     // a list's items, a dict's pairs; 0 for anything else
  Value operator[](size_t i) const;        // a list's item
  Value find(std::string_view key) const;  // a dict's value at a string key (the last set)
  Value key(size_t i) const;               // a dict's i-th key and value, in insertion order
  Value value(size_t i) const;
  std::optional<std::string_view> text() const;  // str and bytes
  std::optional<int64_t> integer() const;        // an int that int64 holds
  std::optional<uint64_t> unsigned_integer() const;
  std::optional<bool> boolean() const;

 private:
  friend class Document;
  Value(const Document* doc, uint32_t id) : doc_(doc), id_(id) {}
  Value() = default;
  const Document* doc_ = nullptr;
  uint32_t id_ = 0;
};

// The values of a pickle as the machine built them, without JSON: strings are views into the
// pickle's own bytes (which the Document keeps), memoised values are shared as in Python, and
// nothing is copied. For readers of large dumps: a 2,000-entry Flight Recorder dump is 120,000
// values, and building them as JSON costs ten times the reading. The same opcodes are refused
// and the same limits applied as by load(). Values may be shared, and a hostile pickle can make
// one contain itself: a reader walks a Document to the depth of the format it reads, never
// recursively over whatever it holds.
class Document {
 public:
  static Document parse(std::string bytes, const PickleLimits& limits = {});
  Value root() const { return {this, root_}; }

  struct Node;

 private:
  friend class Value;
  std::shared_ptr<const std::string> bytes_;
  std::shared_ptr<const std::vector<Node>> nodes_;
  std::shared_ptr<const std::vector<uint32_t>> items_;  // every container's items
  uint32_t root_ = 0;
};

}  // namespace commtool::pickle
