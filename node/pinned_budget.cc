// The node's pinned-memory budget and each local rank's share (include/tandem/node.h).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tandem/error.h"
#include "tandem/node.h"

namespace tandem {

uint64_t ParseByteSize(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument, "byte size '" + text + "': " + why);
  };
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const size_t num_begin = i;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == num_begin) throw bad("expected a non-negative number, then an optional unit");
  const std::string number = text.substr(num_begin, i - num_begin);
  if (std::count(number.begin(), number.end(), '.') > 1) throw bad("malformed number");
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) break;
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) throw bad("unexpected text after the unit");
  long double scale = 0;
  static const struct {
    const char* name;
    long double scale;
  } kUnits[] = {{"", 1},
                {"b", 1},
                {"k", 1024.0L},
                {"kib", 1024.0L},
                {"kb", 1e3L},
                {"m", 1048576.0L},
                {"mib", 1048576.0L},
                {"mb", 1e6L},
                {"g", 1073741824.0L},
                {"gib", 1073741824.0L},
                {"gb", 1e9L},
                {"t", 1099511627776.0L},
                {"tib", 1099511627776.0L},
                {"tb", 1e12L}};
  for (const auto& u : kUnits)
    if (unit == u.name) scale = u.scale;
  if (scale == 0) throw bad("unknown unit '" + unit + "' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  const long double value = std::strtold(number.c_str(), nullptr) * scale;
  if (!(value < 18446744073709551616.0L)) throw bad("beyond 2^64 - 1 bytes");
  return static_cast<uint64_t>(std::floor(value));
}

uint64_t NodePinnedBudget() {
  if (const char* env = std::getenv("TANDEM_NODE_PINNED_BUDGET"); env != nullptr && *env != 0) {
    try {
      return ParseByteSize(env);
    } catch (const Error& e) {
      throw Error(ErrorKind::kInvalidArgument, "TANDEM_NODE_PINNED_BUDGET: " + e.message());
    }
  }
  // Half of the physical memory: /proc/meminfo's MemTotal (line by line: some lines have
  // no unit), else sysconf's page count (sandboxes may present another /proc).
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    const uint64_t kib = std::strtoull(line.c_str() + 9, nullptr, 10);
    if (kib > 0) return kib * 1024 / 2;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
  return 0;
}

uint64_t PinnedBudget(int local_world_size, uint64_t node_budget_bytes) {
  if (local_world_size < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "local_world_size must be >= 1, got " + std::to_string(local_world_size));
  const uint64_t node = node_budget_bytes != 0 ? node_budget_bytes : NodePinnedBudget();
  return node / static_cast<uint64_t>(local_world_size);
}

}  // namespace tandem
