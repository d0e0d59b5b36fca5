// Prometheus building blocks: counters cheap enough for the request path,
// a fixed-bucket latency histogram, and the text exposition format 0.0.4.
//
// Two kinds of counters:
// - ShardCounter has one writer thread (the worker that owns it) and any
//   number of readers (the scrape). Add() is a relaxed load and store: no
//   lock prefix, no contention, and readers never see a torn value.
// - SharedCounter may be written by any thread: a relaxed fetch_add. For
//   what is rare next to a request (rewrites, reloads).
// Pure: no I/O, no clocks; unit-tested.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace remold::prometheus {

class ShardCounter {
 public:
  void Add(uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class SharedCounter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Upper bounds of the latency buckets, 100 us .. 10 s, in nanoseconds, and
// as Prometheus prints them in `le`.
inline constexpr std::array<int64_t, 16> kLatencyBoundsNs = {
    100'000,     250'000,     500'000,       1'000'000,     2'500'000,     5'000'000,
    10'000'000,  25'000'000,  50'000'000,    100'000'000,   250'000'000,   500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr std::array<std::string_view, 16> kLatencyBoundLabels = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05",   "0.1",     "0.25",   "0.5",   "1",      "2.5",   "5",    "10"};
inline constexpr size_t kLatencyBuckets = kLatencyBoundsNs.size() + 1;  // + the +Inf bucket

// The bucket an observation falls in: the first whose bound is >= it
// (Prometheus buckets are "less than or equal"); the last is +Inf.
inline size_t LatencyBucket(int64_t ns) {
  size_t i = 0;
  while (i < kLatencyBoundsNs.size() && ns > kLatencyBoundsNs[i]) ++i;
  return i;
}

// What a scrape reads: per-bucket (not cumulative) counts and the sum.
struct HistogramSnapshot {
  std::array<uint64_t, kLatencyBuckets> counts{};
  uint64_t sum_ns = 0;

  uint64_t count() const;
  void Merge(const HistogramSnapshot& other);
};

template <class Counter>
class LatencyHistogram {
 public:
  void Observe(std::chrono::nanoseconds duration) {
    const int64_t ns = duration.count() < 0 ? 0 : duration.count();
    counts_[LatencyBucket(ns)].Add(1);
    sum_ns_.Add(static_cast<uint64_t>(ns));
  }
  void AddTo(HistogramSnapshot& out) const {
    for (size_t i = 0; i < kLatencyBuckets; ++i) out.counts[i] += counts_[i].Get();
    out.sum_ns += sum_ns_.Get();
  }

 private:
  std::array<Counter, kLatencyBuckets> counts_;
  Counter sum_ns_;
};

struct Label {
  std::string_view name;
  std::string_view value;
};

// Builds a text exposition (format 0.0.4). Samples of one family must follow
// its Family() line, as the format requires.
class TextWriter {
 public:
  // # HELP and # TYPE lines. type: counter, gauge or histogram.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value);
  void Sample(std::string_view name, std::initializer_list<Label> labels, double value);
  // name_bucket{..., le="..."} (cumulative, +Inf last), name_sum (seconds), name_count.
  void Histogram(std::string_view name, std::initializer_list<Label> labels,
                 const HistogramSnapshot& histogram);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void SampleStart(std::string_view name, std::string_view suffix,
                   std::initializer_list<Label> labels, const Label* extra);

  std::string out_;
};

// A label value escaped for the text format (\\, \", \n).
std::string EscapeLabelValue(std::string_view value);
// A sample value as the text format spells it (NaN, +Inf, -Inf, shortest decimal).
std::string FormatValue(double value);

}  // namespace remold::prometheus
