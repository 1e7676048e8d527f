#include "planner/read_file.h"

#include <fstream>
#include <sstream>

#include "tandem/error.h"

namespace tandem::planner {

std::string ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIO, path + ": cannot open " + what);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIO, path + ": read failed");
  return text.str();
}

}  // namespace tandem::planner
