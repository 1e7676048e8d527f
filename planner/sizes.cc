// Byte sizes and counts with units, as the command line takes them.
#include <cctype>
#include <cmath>
#include <string>

#include "tandem/error.h"
#include "tandem/planner.h"

namespace tandem::planner {
namespace {

// Splits "1.5 GiB" into 1.5 and "gib"; throws naming `what` when there is no number.
void Split(std::string_view text, const char* what, double* value, std::string* unit) {
  const std::string s(text);
  size_t used = 0;
  try {
    *value = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || !std::isfinite(*value) || *value < 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + " '" + s + "': expected a non-negative number " +
                    (std::string(what) == "count"
                         ? "with an optional suffix K, M, B or T (e.g. 8e9, 8030261248, 7.5B)"
                         : "with a unit (e.g. 80GiB, 141GB)"));
  unit->clear();
  for (size_t i = used; i < s.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(s[i])))
      unit->push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i]))));
}

uint64_t Checked(double v, std::string_view text, const char* what) {
  if (v >= 1.8e19)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + " '" + std::string(text) + "' is too large");
  return static_cast<uint64_t>(std::llround(v));
}

}  // namespace

uint64_t ParseBytes(std::string_view text) {
  double v = 0;
  std::string unit;
  Split(text, "size", &v, &unit);
  if (unit.empty()) {
    // A bare number was once read as bytes, so "--gpu-mem 80" planned for 80 bytes.
    const std::string n(text);
    throw Error(ErrorKind::kInvalidArgument,
                "size '" + n + "' has no unit: write e.g. '" + n + "GiB' (2^30 bytes) or '" + n +
                    "GB' (10^9 bytes); units B, KB, MB, GB, TB (powers of 1000), KiB, MiB, "
                    "GiB, TiB (powers of 1024)");
  }
  static const struct {
    const char* unit;
    double scale;
  } kUnits[] = {{"b", 1},           {"kb", 1e3},           {"mb", 1e6},
                {"gb", 1e9},        {"tb", 1e12},          {"kib", 1024.0},
                {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const auto& u : kUnits)
    if (unit == u.unit) return Checked(v * u.scale, text, "size");
  throw Error(ErrorKind::kInvalidArgument, "size '" + std::string(text) + "': unknown unit '" +
                                               unit + "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

uint64_t ParseCount(std::string_view text) {
  double v = 0;
  std::string unit;
  Split(text, "count", &v, &unit);
  double scale = 0;
  if (unit.empty()) scale = 1;
  if (unit == "k") scale = 1e3;
  if (unit == "m") scale = 1e6;
  if (unit == "b" || unit == "g") scale = 1e9;
  if (unit == "t") scale = 1e12;
  if (scale == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "count '" + std::string(text) + "': unknown suffix '" + unit + "' (K, M, B, T)");
  // Without a suffix the number is the count itself (8030261248, 8.03e9) and must be whole;
  // with one it is a rounded figure (7.5B) and is rounded to the nearest parameter.
  if (unit.empty() && v != std::floor(v))
    throw Error(ErrorKind::kInvalidArgument,
                "count '" + std::string(text) + "' is not a whole number of parameters");
  return Checked(v * scale, text, "count");
}

double ToGiB(uint64_t bytes) { return static_cast<double>(bytes) / 1073741824.0; }

}  // namespace tandem::planner
