// TempDir: a fresh directory under the system temp directory, removed with
// everything in it when the TempDir goes. For tests that need a rules
// directory built at run time (the loader's C++ tests, loader_*_test.cc).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace remold {

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "remold-loader-XXXXXX").string();
    if (char* made = mkdtemp(pattern.data())) path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to the file `name` of the directory; returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    std::filesystem::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace remold
