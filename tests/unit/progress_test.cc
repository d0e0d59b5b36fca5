#include "tools/common/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace remold {
namespace {

TEST(ProgressTest, Thousands) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(WithThousands(1000), "1,000");
  EXPECT_EQ(WithThousands(4812), "4,812");
  EXPECT_EQ(WithThousands(1234567), "1,234,567");
  EXPECT_EQ(WithThousands(-1234), "-1,234");
}

TEST(ProgressTest, BarWithTotal) {
  EXPECT_EQ(RenderBar(4812, 10000, "posts", 10), "[####......] 48%  4,812/10,000 posts");
  EXPECT_EQ(RenderBar(0, 10, "posts", 10), "[..........] 0%  0/10 posts");
  EXPECT_EQ(RenderBar(10, 10, "posts", 10), "[##########] 100%  10/10 posts");
}

TEST(ProgressTest, BarPastAnEstimateStopsAtFull) {
  EXPECT_EQ(RenderBar(12, 10, "posts", 10), "[##########] 100%  12/10 posts");
  EXPECT_EQ(RenderBar(3, 0, "posts", 4), "[####] 100%  3/0 posts");
}

TEST(ProgressTest, BarWithoutTotal) { EXPECT_EQ(RenderBar(4812, std::nullopt, "posts"), "4,812 posts"); }

const ProgressLabels kComments{"reconcile: rule comments", "blog.posts", "checked", "posts"};

TEST(ProgressTest, PlainLine) {
  EXPECT_EQ(RenderProgressLine(kComments, 4812, 10000),
            "reconcile: rule comments: 4812/10000 blog.posts checked");
  EXPECT_EQ(RenderProgressLine(kComments, 7, std::nullopt),
            "reconcile: rule comments: 7 blog.posts checked");
}

TEST(ProgressTest, RateAndTimeLeft) {
  EXPECT_EQ(RenderRate(2500, 100000, 2.0, false), ", 1250/s, ETA 78 s");
  EXPECT_EQ(RenderRate(2500, 100000, 2.0, true), "  1,250/s  ETA 1:18");
  EXPECT_EQ(RenderRate(2500, std::nullopt, 2.0, false), ", 1250/s");  // no total: the rate alone
  EXPECT_EQ(RenderRate(2500, 2000, 2.0, false), ", 1250/s, ETA 0 s");  // past an estimate
}

TEST(ProgressTest, TheFinalLineCarriesTheAverageRate) {
  std::ostringstream err;
  ProgressLabels labels = kComments;
  labels.rate = true;
  Progress progress(err, false, labels, 3);
  for (int i = 0; i < 3; ++i) progress.Step();
  progress.Finish();
  const std::string out = err.str();
  EXPECT_EQ(out.rfind("reconcile: rule comments: 3/3 blog.posts checked, ", 0), 0u) << out;
  EXPECT_EQ(out.substr(out.size() - 3), "/s\n") << out;
}

TEST(ProgressTest, NotATerminalPrintsPlainLinesOnly) {
  std::ostringstream err;
  Progress progress(err, false, kComments, 3);
  for (int i = 0; i < 3; ++i) progress.Step();
  progress.Clear();
  progress.Finish();
  // Steps come faster than every 2 s: only the final line.
  EXPECT_EQ(err.str(), "reconcile: rule comments: 3/3 blog.posts checked\n");
}

TEST(ProgressTest, TerminalRedrawsInPlaceAndClearsForReportLines) {
  std::ostringstream err;
  Progress progress(err, true, kComments, 2);
  progress.Step();
  progress.Clear();
  progress.Step();  // redrawn at once after a Clear
  progress.Finish();
  std::string out = err.str();
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  EXPECT_NE(out.find("\r\x1b[K"), std::string::npos);
  EXPECT_NE(out.find("[####################] 100%  2/2 posts"), std::string::npos) << out;
  EXPECT_NE(out.find("[....................] 0%  0/2 posts"), std::string::npos) << out;
}

}  // namespace
}  // namespace remold
