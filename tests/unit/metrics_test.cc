// The Prometheus text rendering, histogram bucketing, and the metrics
// registry (proxy/prometheus.h, proxy/metrics.h).
#include <bson/bson.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "proxy/metrics.h"
#include "proxy/prometheus.h"
#include "proxy/wire/wire_format.h"

namespace remold {
namespace {

using namespace std::chrono_literals;
using prometheus::HistogramSnapshot;
using prometheus::LatencyBucket;
using prometheus::LatencyHistogram;
using prometheus::SharedCounter;
using prometheus::ShardCounter;
using prometheus::TextWriter;

std::vector<uint8_t> Bytes(const bson_t* doc) {
  return {bson_get_data(doc), bson_get_data(doc) + doc->len};
}

TEST(Histogram, BucketsAreLessThanOrEqual) {
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(100'000), 0u);  // exactly 100 us: le="0.0001"
  EXPECT_EQ(LatencyBucket(100'001), 1u);
  EXPECT_EQ(LatencyBucket(250'000), 1u);
  EXPECT_EQ(LatencyBucket(1'000'000), 3u);  // 1 ms
  EXPECT_EQ(LatencyBucket(10'000'000'000), 15u);  // 10 s: the last bound
  EXPECT_EQ(LatencyBucket(10'000'000'001), 16u);  // +Inf
  EXPECT_EQ(LatencyBucket(INT64_MAX), 16u);
}

TEST(Histogram, BoundsAndLabelsAgree) {
  for (size_t i = 0; i < prometheus::kLatencyBoundsNs.size(); ++i) {
    double label = std::stod(std::string(prometheus::kLatencyBoundLabels[i]));
    EXPECT_DOUBLE_EQ(label * 1e9, static_cast<double>(prometheus::kLatencyBoundsNs[i])) << i;
    if (i > 0) {
      EXPECT_LT(prometheus::kLatencyBoundsNs[i - 1], prometheus::kLatencyBoundsNs[i]);
    }
  }
}

TEST(Histogram, ObserveAndSnapshot) {
  LatencyHistogram<ShardCounter> histogram;
  histogram.Observe(50us);
  histogram.Observe(100us);
  histogram.Observe(3ms);
  histogram.Observe(20s);
  histogram.Observe(-5ns);  // a clock step: counted as 0
  HistogramSnapshot snapshot;
  histogram.AddTo(snapshot);
  EXPECT_EQ(snapshot.counts[0], 3u);
  EXPECT_EQ(snapshot.counts[LatencyBucket(3'000'000)], 1u);
  EXPECT_EQ(snapshot.counts[16], 1u);
  EXPECT_EQ(snapshot.count(), 5u);
  EXPECT_EQ(snapshot.sum_ns, 50'000u + 100'000u + 3'000'000u + 20'000'000'000u);
  HistogramSnapshot twice = snapshot;
  twice.Merge(snapshot);
  EXPECT_EQ(twice.count(), 10u);
  EXPECT_EQ(twice.sum_ns, 2 * snapshot.sum_ns);
}

TEST(PrometheusText, CounterAndGaugeFamilies) {
  TextWriter out;
  out.Family("remold_things_total", "counter", "Things.");
  out.Sample("remold_things_total", {}, uint64_t{3});
  out.Family("remold_by_kind_total", "counter", "Things by kind.");
  out.Sample("remold_by_kind_total", {{"kind", "a"}}, uint64_t{1});
  out.Sample("remold_by_kind_total", {{"kind", "b"}, {"x", "y"}}, uint64_t{0});
  out.Family("remold_level", "gauge", "A level.");
  out.Sample("remold_level", {}, 0.25);
  EXPECT_EQ(out.text(),
            "# HELP remold_things_total Things.\n"
            "# TYPE remold_things_total counter\n"
            "remold_things_total 3\n"
            "# HELP remold_by_kind_total Things by kind.\n"
            "# TYPE remold_by_kind_total counter\n"
            "remold_by_kind_total{kind=\"a\"} 1\n"
            "remold_by_kind_total{kind=\"b\",x=\"y\"} 0\n"
            "# HELP remold_level A level.\n"
            "# TYPE remold_level gauge\n"
            "remold_level 0.25\n");
}

TEST(PrometheusText, Escaping) {
  EXPECT_EQ(prometheus::EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  TextWriter out;
  out.Family("m", "counter", "Help with \\ and\nnewline and \"quotes\".");
  out.Sample("m", {{"rule", "we\"ird\\name\n"}}, uint64_t{1});
  // HELP escapes backslash and newline only; label values also quotes.
  EXPECT_EQ(out.text(),
            "# HELP m Help with \\\\ and\\nnewline and \"quotes\".\n"
            "# TYPE m counter\n"
            "m{rule=\"we\\\"ird\\\\name\\n\"} 1\n");
}

TEST(PrometheusText, Values) {
  EXPECT_EQ(prometheus::FormatValue(0), "0");
  EXPECT_EQ(prometheus::FormatValue(42), "42");
  EXPECT_EQ(prometheus::FormatValue(-3), "-3");
  EXPECT_EQ(prometheus::FormatValue(0.1), "0.1");
  EXPECT_EQ(prometheus::FormatValue(1e-7), "1e-07");
  EXPECT_EQ(std::stod(prometheus::FormatValue(0.123456789012)), 0.123456789012);
  EXPECT_EQ(prometheus::FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus::FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(prometheus::FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(PrometheusText, Histogram) {
  HistogramSnapshot snapshot;
  snapshot.counts[0] = 2;                              // <= 100 us
  snapshot.counts[3] = 1;                              // <= 1 ms
  snapshot.counts[16] = 1;                             // +Inf
  snapshot.sum_ns = 1'500'000'000;
  TextWriter out;
  out.Family("lat_seconds", "histogram", "Latency.");
  out.Histogram("lat_seconds", {{"rule", "r"}}, snapshot);
  const std::string& text = out.text();
  EXPECT_NE(text.find("lat_seconds_bucket{rule=\"r\",le=\"0.0001\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{rule=\"r\",le=\"0.00025\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{rule=\"r\",le=\"0.001\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{rule=\"r\",le=\"10\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{rule=\"r\",le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_sum{rule=\"r\"} 1.5\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_count{rule=\"r\"} 4\n"), std::string::npos);
  // 17 buckets, sum, count; in that order, after HELP and TYPE.
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 2u + 17u + 2u);
  EXPECT_LT(text.find("le=\"+Inf\""), text.find("_sum"));
  EXPECT_LT(text.find("_sum"), text.find("_count"));

  TextWriter bare;
  bare.Histogram("h", {}, HistogramSnapshot{});
  EXPECT_NE(bare.text().find("h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n"), std::string::npos);
}

TEST(Metrics, CommandSlots) {
  EXPECT_EQ(CommandSlotName(CommandSlot("insert")), "insert");
  EXPECT_EQ(CommandSlotName(CommandSlot("isMaster")), "isMaster");
  EXPECT_EQ(CommandSlotName(CommandSlot("ismaster")), "ismaster");
  EXPECT_EQ(CommandSlot("someCommandNobodyKnows"), 0u);
  EXPECT_EQ(CommandSlot(""), 0u);
  EXPECT_EQ(CommandSlotName(0), "other");
  EXPECT_LE(CommandSlotCount(), kMaxCommandSlots);
}

TEST(Metrics, RendersShardsSummed) {
  Metrics metrics;
  MetricsShard& a = metrics.NewShard();
  MetricsShard& b = metrics.NewShard();
  a.connections_opened.Add(3);
  a.connections_closed.Add(1);
  b.connections_opened.Add(2);
  b.connections_closed.Add(2);
  a.CountRequest("insert");
  b.CountRequest("insert");
  b.CountRequest("frobnicate");
  a.bytes_received.Add(100);
  b.bytes_sent.Add(7);
  a.backend_roundtrip.Observe(200us);
  b.backend_roundtrip.Observe(2s);
  b.CountConnectionError(ConnectionError::kBackendLost);
  metrics.connections_refused.Add();
  const std::string text = metrics.Render();
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text;
  };
  has("remold_connections_open 2");
  has("remold_connections_total 5");
  has("remold_connections_refused_total 1");
  has("remold_connection_errors_total{reason=\"backend_lost\"} 1");
  has("remold_connection_errors_total{reason=\"backend_unreachable\"} 0");
  has("remold_requests_total{command=\"insert\"} 2");
  has("remold_requests_total{command=\"other\"} 1");
  EXPECT_EQ(text.find("command=\"find\""), std::string::npos) << "zero commands are left out";
  has("remold_bytes_received_total 100");
  has("remold_bytes_sent_total 7");
  has("remold_backend_roundtrip_seconds_bucket{le=\"0.00025\"} 1");
  has("remold_backend_roundtrip_seconds_bucket{le=\"2.5\"} 2");
  has("remold_backend_roundtrip_seconds_count 2");
  has("remold_backend_roundtrip_seconds_sum 2.0002");
  has("# TYPE remold_backend_roundtrip_seconds histogram");
}

TEST(Metrics, LocalShardIsPerThread) {
  Metrics metrics;
  MetricsShard* main_shard = &metrics.LocalShard();
  EXPECT_EQ(main_shard, &metrics.LocalShard());
  MetricsShard* other = nullptr;
  std::thread([&] { other = &metrics.LocalShard(); }).join();
  EXPECT_NE(other, main_shard);
  main_shard->CountRequest("find");
  other->CountRequest("find");
  EXPECT_NE(metrics.Render().find("remold_requests_total{command=\"find\"} 2\n"), std::string::npos);
  Metrics second;  // another registry: another shard on the same thread
  EXPECT_NE(&second.LocalShard(), main_shard);
}

TEST(Metrics, RulesSortedAndStable) {
  Metrics metrics;
  RuleMetrics& b = metrics.ForRule("readings");
  RuleMetrics& a = metrics.ForRule("products");
  EXPECT_EQ(&metrics.ForRule("readings"), &b);
  b.rewrites.Add(4);
  b.errors.Add(1);
  b.seconds.Observe(3ms);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("remold_rewrites_total{rule=\"products\"} 0\n"
                      "remold_rewrites_total{rule=\"readings\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("remold_rewrite_errors_total{rule=\"readings\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("remold_rewrite_seconds_bucket{rule=\"readings\",le=\"0.005\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("remold_rewrite_seconds_count{rule=\"products\"} 0\n"), std::string::npos);
  (void)a;
}

TEST(Metrics, RulesFromManyThreads) {
  Metrics metrics;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < 1000; ++i) metrics.ForRule("rule" + std::to_string((i + t) % 20)).rewrites.Add();
    });
  }
  for (auto& thread : threads) thread.join();
  uint64_t total = 0;
  for (int r = 0; r < 20; ++r) total += metrics.ForRule("rule" + std::to_string(r)).rewrites.Get();
  EXPECT_EQ(total, 4000u);
}

TEST(Metrics, ErrorsFromReplies) {
  Metrics metrics;
  bson_t* ok = BCON_NEW("n", BCON_INT32(1), "ok", BCON_DOUBLE(1));
  EXPECT_FALSE(metrics.CountReplyErrors(Bytes(ok)));
  bson_t* failed = BCON_NEW("ok", BCON_DOUBLE(0), "errmsg", BCON_UTF8("no"), "code", BCON_INT32(59),
                            "codeName", BCON_UTF8("CommandNotFound"));
  EXPECT_TRUE(metrics.CountReplyErrors(Bytes(failed)));
  bson_t* write_errors = BCON_NEW("n", BCON_INT32(0), "writeErrors", "[",
                                  "{", "index", BCON_INT32(0), "code", BCON_INT32(11000), "}",
                                  "{", "index", BCON_INT32(1), "code", BCON_INT32(11000), "}", "]",
                                  "writeConcernError", "{", "code", BCON_INT32(64), "}",
                                  "ok", BCON_INT32(1));
  EXPECT_FALSE(metrics.CountReplyErrors(Bytes(write_errors)));
  bson_t* no_code = BCON_NEW("ok", BCON_INT32(0), "errmsg", BCON_UTF8("?"));
  EXPECT_TRUE(metrics.CountReplyErrors(Bytes(no_code)));
  EXPECT_FALSE(metrics.CountReplyErrors({}));
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("remold_errors_total{code=\"59\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("remold_errors_total{code=\"11000\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("remold_errors_total{code=\"64\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("remold_errors_total{code=\"none\"} 1\n"), std::string::npos);
  for (bson_t* doc : {ok, failed, write_errors, no_code}) bson_destroy(doc);
}

TEST(Metrics, ReplyScanReadsEveryElementType) {
  Metrics metrics;
  bson_t doc = BSON_INITIALIZER;
  bson_oid_t oid;
  bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
  bson_decimal128_t decimal;
  bson_decimal128_from_string("1.5", &decimal);
  const uint8_t bytes[3] = {1, 2, 3};
  BSON_APPEND_UTF8(&doc, "s", "x");
  BSON_APPEND_BINARY(&doc, "b", BSON_SUBTYPE_BINARY, bytes, 3);
  BSON_APPEND_OID(&doc, "o", &oid);
  BSON_APPEND_BOOL(&doc, "t", true);
  BSON_APPEND_DATE_TIME(&doc, "d", 5);
  BSON_APPEND_NULL(&doc, "n");
  BSON_APPEND_REGEX(&doc, "r", "^a.*", "i");
  BSON_APPEND_CODE(&doc, "c", "function() {}");
  BSON_APPEND_TIMESTAMP(&doc, "ts", 1, 2);
  BSON_APPEND_INT64(&doc, "l", 7);
  BSON_APPEND_DECIMAL128(&doc, "dec", &decimal);
  BSON_APPEND_MINKEY(&doc, "min");
  BSON_APPEND_MAXKEY(&doc, "max");
  BSON_APPEND_INT32(&doc, "code", 13);
  BSON_APPEND_INT64(&doc, "ok", 0);  // found after all of them
  EXPECT_TRUE(metrics.CountReplyErrors(Bytes(&doc)));
  EXPECT_NE(metrics.Render().find("remold_errors_total{code=\"13\"} 1\n"), std::string::npos);
  bson_destroy(&doc);

  for (auto make : {+[](bson_t* d) { BSON_APPEND_INT32(d, "ok", 1); },
                    +[](bson_t* d) { BSON_APPEND_BOOL(d, "ok", true); },
                    +[](bson_t* d) { BSON_APPEND_DOUBLE(d, "ok", 1.0); }}) {
    bson_t ok = BSON_INITIALIZER;
    make(&ok);
    EXPECT_FALSE(metrics.CountReplyErrors(Bytes(&ok)));
    bson_destroy(&ok);
  }
}

TEST(Metrics, ReplyScanSurvivesGarbage) {
  Metrics metrics;
  bson_t* doc = BCON_NEW("cursor", "{", "id", BCON_INT64(0), "}", "code", BCON_INT32(2), "ok",
                         BCON_DOUBLE(0));
  std::vector<uint8_t> bytes = Bytes(doc);
  bson_destroy(doc);
  // Every truncation, and every byte changed: no crash, no read past the end.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    metrics.CountReplyErrors(cut);
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t v : {0x00, 0x01, 0x04, 0x7f, 0x80, 0xff}) {
      std::vector<uint8_t> changed = bytes;
      changed[i] = v;
      metrics.CountReplyErrors(changed);
    }
  }
  EXPECT_TRUE(metrics.CountReplyErrors(bytes));
}

TEST(Metrics, ErrorCodesAreBounded) {
  Metrics metrics;
  for (int32_t code = 0; code < static_cast<int32_t>(Metrics::kMaxErrorCodes) + 10; ++code)
    metrics.CountError(code);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("remold_errors_total{code=\"other\"} 10\n"), std::string::npos);
}

TEST(Metrics, OpMsgBody) {
  bson_t* doc = BCON_NEW("ok", BCON_INT32(1));
  // header, flags, kind 0, the document
  std::vector<uint8_t> message(wire::kHeaderSize + 5 + doc->len, 0);
  std::memcpy(message.data() + wire::kHeaderSize + 5, bson_get_data(doc), doc->len);
  wire::WriteHeader(message.data(), {static_cast<int32_t>(message.size()), 1, 0,
                                     static_cast<int32_t>(wire::OpCode::kMsg)});
  std::span<const uint8_t> body = OpMsgBody(message);
  ASSERT_EQ(body.size(), doc->len);
  EXPECT_EQ(0, std::memcmp(body.data(), bson_get_data(doc), doc->len));

  std::vector<uint8_t> truncated(message.begin(), message.end() - 2);
  wire::WriteHeader(truncated.data(), {static_cast<int32_t>(truncated.size()), 1, 0,
                                       static_cast<int32_t>(wire::OpCode::kMsg)});
  EXPECT_TRUE(OpMsgBody(truncated).empty());
  std::vector<uint8_t> reply_op = message;
  wire::WriteHeader(reply_op.data(), {static_cast<int32_t>(reply_op.size()), 1, 0, 1});
  EXPECT_TRUE(OpMsgBody(reply_op).empty());
  EXPECT_TRUE(OpMsgBody({}).empty());
  bson_destroy(doc);
}

}  // namespace
}  // namespace remold
