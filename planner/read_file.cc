#include "planner/read_file.h"

#include <fstream>

#include "tandem/error.h"

namespace tandem::planner {

std::string ReadWholeFile(const std::string& path, const std::string& what, uint64_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIO, path + ": cannot open " + what);
  std::string text;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > limit)
      throw Error(ErrorKind::kInvalidArgument,
                  path + ": the " + what + " is larger than " + std::to_string(limit) +
                      " bytes, the most the planner reads; is it the right file?");
  }
  if (in.bad()) throw Error(ErrorKind::kIO, path + ": read failed");
  return text;
}

}  // namespace tandem::planner
