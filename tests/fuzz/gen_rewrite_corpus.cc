// Writes the seed corpus of fuzz_rewrite: one input per golden case of the
// rewrite engine (tests/golden/cases/<pattern>/<case>/), as
// DIR/golden_<pattern>_<case>: the index of the case's rule set
// (tests/fuzz/rule_sets.h), its capabilities, its command.json and its
// replies.json, in the format of tests/fuzz/rewrite_input.h. So the fuzzer
// starts from every plan the golden cases reach, replies and all.
//   gen_rewrite_corpus DIR
// A case whose rules or capabilities are not in the fuzzer's lists is
// named on stderr and skipped.
#include <bson/bson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/doc.h"
#include "tests/fuzz/rewrite_input.h"
#include "tests/fuzz/rule_sets.h"

namespace {

namespace fs = std::filesystem;
using namespace remold;

std::optional<Doc> ReadJson(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  std::optional<Doc> doc = Doc::FromJson(text.str(), &error);
  if (!doc) std::fprintf(stderr, "%s: %s\n", path.c_str(), error.c_str());
  return doc;
}

// The index in fuzz::kCapabilities of the case's capabilities.json.
std::optional<uint8_t> CapabilitiesOf(const fs::path& dir) {
  Capabilities caps;
  if (fs::exists(dir / "capabilities.json")) {
    std::optional<Doc> doc = ReadJson(dir / "capabilities.json");
    if (!doc) return std::nullopt;
    auto read = [&](const char* key, int32_t& field) {
      if (std::optional<int64_t> value = FindInteger(doc->get(), key)) field = static_cast<int32_t>(*value);
    };
    read("max_write_batch_size", caps.max_write_batch_size);
    read("max_bson_object_size", caps.max_bson_object_size);
    read("max_message_size_bytes", caps.max_message_size_bytes);
    read("max_wire_version", caps.max_wire_version);
  }
  for (size_t i = 0; i < std::size(fuzz::kCapabilities); ++i) {
    const Capabilities& c = fuzz::kCapabilities[i];
    if (c.max_write_batch_size == caps.max_write_batch_size &&
        c.max_bson_object_size == caps.max_bson_object_size &&
        c.max_message_size_bytes == caps.max_message_size_bytes &&
        c.max_wire_version == caps.max_wire_version)
      return static_cast<uint8_t>(i);
  }
  return std::nullopt;
}

std::vector<Doc> Replies(const fs::path& dir) {
  std::vector<Doc> replies;
  if (!fs::exists(dir / "replies.json")) return replies;
  std::optional<Doc> array = ReadJson(dir / "replies.json");  // {"0": .., "1": ..}
  if (!array) return replies;
  bson_iter_t it;
  bson_iter_init(&it, array->get());
  while (bson_iter_next(&it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
    uint32_t length = 0;
    const uint8_t* data = nullptr;
    bson_iter_document(&it, &length, &data);
    replies.push_back(Doc::FromBytes({data, length}));
  }
  return replies;
}

std::vector<fs::path> CaseFolders(const fs::path& root) {
  std::vector<fs::path> folders;
  for (const auto& pattern : fs::directory_iterator(root))
    if (pattern.is_directory())
      for (const auto& dir : fs::directory_iterator(pattern.path()))
        if (fs::exists(dir.path() / "command.json")) folders.push_back(dir.path());
  std::sort(folders.begin(), folders.end());
  return folders;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_rewrite_corpus DIR\n");
    return 2;
  }
  const fs::path out(argv[1]);
  fs::create_directories(out);
  const std::vector<fuzz::RuleSetEntry> sets = fuzz::LoadRuleSets(REMOLD_FUZZ_RULE_SETS, REMOLD_GOLDEN_CASES);
  int written = 0, skipped = 0;
  for (const fs::path& dir : CaseFolders(REMOLD_GOLDEN_CASES)) {
    const std::string name = dir.parent_path().filename().string() + "_" + dir.filename().string();
    const std::string key = fuzz::RuleSetKey(dir.string());
    auto set = std::find_if(sets.begin(), sets.end(), [&](const auto& s) { return s.key == key; });
    std::optional<uint8_t> caps = CapabilitiesOf(dir);
    std::optional<Doc> command = ReadJson(dir / "command.json");
    if (set == sets.end() || !caps || !command) {
      std::fprintf(stderr, "skipped %s: %s\n", name.c_str(),
                   set == sets.end() ? "its rules are not in rewrite_rule_sets.txt"
                   : !caps           ? "its capabilities are not in kCapabilities"
                                     : "command.json does not parse");
      ++skipped;
      continue;
    }
    std::vector<uint8_t> bytes = fuzz::WriteRewriteInput(static_cast<uint8_t>(set - sets.begin()), *caps,
                                                         true, *command, Replies(dir));
    std::ofstream(out / ("golden_" + name), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ++written;
  }
  std::printf("gen_rewrite_corpus: %d inputs written to %s, %d cases skipped\n", written, out.c_str(),
              skipped);
  return 0;
}
