// Progress of a long scan by an offline tool, on stderr.
//
// On a terminal: one line redrawn in place with '\r', at most ten times a
// second:  [########............] 41%  4,812/11,630 posts
// Otherwise: a plain line at most every 2 s, and one at the end:
//   reconcile: rule comments: 4812/11630 blog.posts checked
// The tool names the scan (ProgressLabels); the wording above is reconcile's.
// `total` is an estimate (a count taken before the scan); without one the
// bar shows the count alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

namespace remold {

// 4812 -> "4,812".
std::string WithThousands(int64_t number);

// "[########............] 41%  4,812/11,630 posts"; without a total,
// "4,812 posts".
std::string RenderBar(int64_t done, std::optional<int64_t> total, const std::string& noun,
                      int width = 20);

// How a scan names itself: "<prefix>: <done>/<total> <ns> <verb>" on the
// plain lines, "<done>/<total> <noun>" on the bar.
struct ProgressLabels {
  std::string prefix;  // "reconcile: rule comments"
  std::string ns;      // "blog.posts"
  std::string verb;    // "checked"
  std::string noun;    // "posts"
  bool rate = false;   // also the rate and, with a total, the time left:
                       // "  1,250/s  ETA 0:42" on the bar, ", 1250/s, ETA 42 s" on lines
};

// "reconcile: rule comments: 4812/11630 blog.posts checked".
std::string RenderProgressLine(const ProgressLabels& labels, int64_t done, std::optional<int64_t> total);

// The rate of `done` documents in `seconds` and, with a `total`, the time
// left at that rate: ", 1250/s, ETA 42 s" on a plain line, "  1,250/s  ETA
// 0:42" on the bar.
std::string RenderRate(int64_t done, std::optional<int64_t> total, double seconds, bool terminal);

class Progress {
 public:
  Progress(std::ostream& err, bool terminal, ProgressLabels labels, std::optional<int64_t> total);
  // A bar left drawn (the scan was cut short) gets its newline.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // One more document scanned.
  void Step();
  // `count` more.
  void Advance(int64_t count);
  // Clears a drawn bar so a report line can be printed; the next Step()
  // draws it again.
  void Clear();
  // The final state, with the average rate (when the labels ask for a
  // rate); a terminal gets a newline after the bar.
  void Finish();

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(bool final = false);
  std::string RateAndEta(bool terminal, bool final) const;

  std::ostream& err_;
  bool terminal_;
  ProgressLabels labels_;
  std::optional<int64_t> total_;
  int64_t done_ = 0;
  bool drawn_ = false;
  Clock::time_point last_;
  Clock::time_point start_;
};

}  // namespace remold
