// CheckPickleBounds: pickle opcodes against the pickle's length (pickle_bounds.h). The
// opcodes and their arguments are those of CPython's Lib/pickletools.py.
#include "python/ext/pickle_bounds.h"

#include <cstdio>
#include <string>

#include "tandem/error.h"

namespace tandem::python {
namespace {

// How an opcode's argument is laid out.
enum class Arg : uint8_t {
  kInvalid,    // not an opcode
  kNone,       // no argument
  kFixed,      // `size` bytes
  kCounted,    // a little-endian length of `size` bytes (signed: `is_signed`), then that many
  kLine,       // text up to a newline (protocol 0)
  kTwoLines,   // GLOBAL, INST: module and name, each up to a newline
};

struct Op {
  Arg arg = Arg::kInvalid;
  uint8_t size = 0;
  bool is_signed = false;
};

struct Table {
  Op ops[256];
  Table() {
    for (const char c : std::string_view("(.012NQR]abd}elost)u", 20)) ops[uint8_t(c)] = {Arg::kNone};
    for (const int c : {0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94,
                        0x97, 0x98})
      ops[c] = {Arg::kNone};
    auto fixed = [&](int c, uint8_t n) { ops[c] = {Arg::kFixed, n}; };
    fixed('J', 4), fixed('K', 1), fixed('M', 2), fixed('G', 8), fixed('h', 1), fixed('j', 4),
        fixed('q', 1), fixed('r', 4), fixed(0x80, 1), fixed(0x82, 1), fixed(0x83, 2),
        fixed(0x84, 4), fixed(0x95, 8);
    auto counted = [&](int c, uint8_t n, bool s) { ops[c] = {Arg::kCounted, n, s}; };
    counted('T', 4, true), counted('U', 1, false), counted('X', 4, false),
        counted(0x8c, 1, false), counted(0x8d, 8, false), counted('B', 4, false),
        counted('C', 1, false), counted(0x8e, 8, false), counted(0x96, 8, false),
        counted(0x8a, 1, false), counted(0x8b, 4, true);
    for (const char c : std::string_view("ILFSVPgp")) ops[uint8_t(c)] = {Arg::kLine};
    ops[uint8_t('c')] = ops[uint8_t('i')] = {Arg::kTwoLines};
  }
};

[[noreturn]] void Bad(uint64_t at, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "byte " + std::to_string(at) + ": " + what);
}

uint64_t LittleEndian(std::string_view d, uint64_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(d[at + i]);
  return v;
}

}  // namespace

uint64_t CheckPickleBounds(std::string_view d) {
  static const Table table;
  const uint64_t size = d.size();
  uint64_t pos = 0, ops = 0, memo = 0;  // memo: the entries defined so far
  auto need = [&](uint64_t at, uint64_t n, const char* what) {
    if (n > size - at)
      Bad(at, std::string(what) + " of " + std::to_string(n) + " bytes runs past the end (" +
                  std::to_string(size) + " bytes)");
  };
  auto line_end = [&](uint64_t at) {
    const size_t nl = d.find('\n', at);
    if (nl == std::string_view::npos) Bad(at, "a line argument has no newline before the end");
    return static_cast<uint64_t>(nl);
  };
  while (pos < size) {
    const uint64_t at = pos;
    const uint8_t code = static_cast<uint8_t>(d[pos++]);
    const Op& op = table.ops[code];
    ++ops;
    uint64_t index = 0;
    bool has_index = false;
    switch (op.arg) {
      case Arg::kInvalid: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", code);
        Bad(at, std::string("opcode ") + hex + " is not a pickle opcode");
      }
      case Arg::kNone:
        break;
      case Arg::kFixed:
        need(pos, op.size, "an argument");
        if (code == 'h' || code == 'j' || code == 'q' || code == 'r')
          index = LittleEndian(d, pos, op.size), has_index = true;
        if (code == 0x95) need(pos + op.size, LittleEndian(d, pos, op.size), "a frame");
        pos += op.size;
        break;
      case Arg::kCounted: {
        need(pos, op.size, "a length field");
        uint64_t n = LittleEndian(d, pos, op.size);
        if (op.is_signed && (n & 0x80000000u)) Bad(at, "a negative length");
        pos += op.size;
        need(pos, n, "an argument");
        pos += n;
        break;
      }
      case Arg::kLine:
      case Arg::kTwoLines: {
        const uint64_t end = line_end(pos);
        if (code == 'g' || code == 'p') {  // GET, PUT: a decimal memo index
          const std::string_view text = d.substr(pos, end - pos);
          if (text.empty() || text.size() > 19 ||
              text.find_first_not_of("0123456789") != std::string_view::npos)
            Bad(at, "a memo index that is not a small decimal number");
          index = std::stoull(std::string(text)), has_index = true;
        }
        pos = end + 1;
        if (op.arg == Arg::kTwoLines) pos = line_end(pos) + 1;
        break;
      }
    }
    if (code == 0x94) ++memo;  // MEMOIZE: the next entry
    if (has_index) {
      const bool put = code == 'p' || code == 'q' || code == 'r';
      if (put && index > memo)
        Bad(at, "memo index " + std::to_string(index) + " skips past the " +
                    std::to_string(memo) + " entries defined so far");
      if (!put && index >= memo)
        Bad(at, "memo index " + std::to_string(index) + " was never defined (" +
                    std::to_string(memo) + " entries)");
      if (put && index == memo) ++memo;
    }
    if (code == '.') return ops;
  }
  Bad(size, "the pickle ends without its STOP opcode");
}

void BindPickleBounds(pybind11::module_& m) {
  m.def(
      "check_pickle_bounds",
      [](const pybind11::bytes& data) {
        const std::string_view view = data;
        return CheckPickleBounds(view);
      },
      pybind11::arg("data"),
      "Checks pickle `data`'s opcodes against its length before it is unpickled: every "
      "argument inside the bytes, every memo index one the pickle defined. Returns the "
      "number of opcodes; raises tandem.InvalidArgumentError (a ValueError) naming the byte.");
}

}  // namespace tandem::python
