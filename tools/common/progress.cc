#include "tools/common/progress.h"

#include <algorithm>
#include <ostream>

namespace remold {
namespace {

constexpr std::chrono::milliseconds kTerminalInterval{100};
constexpr std::chrono::seconds kLineInterval{2};

std::string Fraction(int64_t done, std::optional<int64_t> total, bool thousands) {
  auto number = [&](int64_t n) { return thousands ? WithThousands(n) : std::to_string(n); };
  return total ? number(done) + "/" + number(*total) : number(done);
}

}  // namespace

std::string WithThousands(int64_t number) {
  std::string digits = std::to_string(number < 0 ? -number : number);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return number < 0 ? "-" + out : out;
}

std::string RenderBar(int64_t done, std::optional<int64_t> total, const std::string& noun, int width) {
  if (!total) return WithThousands(done) + " " + noun;
  // The total is an estimate: a scan may pass it.
  int64_t percent = *total > 0 ? std::min<int64_t>(100, done * 100 / *total) : 100;
  int64_t filled = percent * width / 100;
  std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  return bar + std::to_string(percent) + "%  " + Fraction(done, total, true) + " " + noun;
}

std::string RenderProgressLine(const ProgressLabels& labels, int64_t done, std::optional<int64_t> total) {
  return labels.prefix + ": " + Fraction(done, total, false) + " " + labels.ns + " " + labels.verb;
}

std::string RenderRate(int64_t done, std::optional<int64_t> total, double seconds, bool terminal) {
  const auto rate = static_cast<int64_t>(done / seconds);
  std::string text = terminal ? "  " + WithThousands(rate) + "/s" : ", " + std::to_string(rate) + "/s";
  if (total && rate > 0) {
    const int64_t left = std::max<int64_t>(0, *total - done) / rate;
    text += terminal ? "  ETA " + std::to_string(left / 60) + ":" + (left % 60 < 10 ? "0" : "") +
                           std::to_string(left % 60)
                     : ", ETA " + std::to_string(left) + " s";
  }
  return text;
}

Progress::Progress(std::ostream& err, bool terminal, ProgressLabels labels, std::optional<int64_t> total)
    : err_(err), terminal_(terminal), labels_(std::move(labels)), total_(total), last_(Clock::now()),
      start_(last_) {
  if (terminal_) Draw();
}

Progress::~Progress() {
  if (drawn_) err_ << "\n" << std::flush;
}

void Progress::Step() { Advance(1); }

void Progress::Advance(int64_t count) {
  done_ += count;
  Clock::time_point now = Clock::now();
  auto interval = terminal_ ? std::chrono::duration_cast<Clock::duration>(kTerminalInterval)
                            : std::chrono::duration_cast<Clock::duration>(kLineInterval);
  if (now - last_ < interval && (drawn_ || !terminal_)) return;
  last_ = now;
  Draw();
}

void Progress::Clear() {
  if (!terminal_ || !drawn_) return;
  err_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

void Progress::Finish() {
  Draw(/*final=*/true);
  if (terminal_) err_ << "\n" << std::flush;
  drawn_ = false;
}

std::string Progress::RateAndEta(bool terminal, bool final) const {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  // While the scan runs, a rate over less than half a second says little.
  if (!labels_.rate || seconds <= 0 || (!final && seconds < 0.5)) return "";
  return RenderRate(done_, final ? std::nullopt : total_, seconds, terminal);
}

void Progress::Draw(bool final) {
  if (terminal_) {
    err_ << "\r" << RenderBar(done_, total_, labels_.noun) << RateAndEta(true, final) << "\x1b[K" << std::flush;
    drawn_ = true;
  } else {
    err_ << RenderProgressLine(labels_, done_, total_) << RateAndEta(false, final) << "\n" << std::flush;
  }
}

}  // namespace remold
