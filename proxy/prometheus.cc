#include "proxy/prometheus.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace remold::prometheus {
namespace {

void AppendEscaped(std::string& out, std::string_view value, bool quotes) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        if (quotes) {
          out += "\\\"";
          break;
        }
        [[fallthrough]];
      default: out += c;
    }
  }
}

}  // namespace

uint64_t HistogramSnapshot::count() const {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  return total;
}

void HistogramSnapshot::Merge(const HistogramSnapshot& other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  sum_ns += other.sum_ns;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendEscaped(out, value, true);
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", value);
    return buf;
  }
  // The shortest form that reads back as the same double.
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

void TextWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  AppendEscaped(out_, help, false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void TextWriter::SampleStart(std::string_view name, std::string_view suffix,
                             std::initializer_list<Label> labels, const Label* extra) {
  out_ += name;
  out_ += suffix;
  if (labels.size() == 0 && !extra) {
    out_ += ' ';
    return;
  }
  out_ += '{';
  bool first = true;
  auto append = [&](const Label& label) {
    if (!first) out_ += ',';
    first = false;
    out_ += label.name;
    out_ += "=\"";
    AppendEscaped(out_, label.value, true);
    out_ += '"';
  };
  for (const Label& label : labels) append(label);
  if (extra) append(*extra);
  out_ += "} ";
}

void TextWriter::Sample(std::string_view name, std::initializer_list<Label> labels,
                        uint64_t value) {
  SampleStart(name, "", labels, nullptr);
  out_ += std::to_string(value);
  out_ += '\n';
}

void TextWriter::Sample(std::string_view name, std::initializer_list<Label> labels,
                        double value) {
  SampleStart(name, "", labels, nullptr);
  out_ += FormatValue(value);
  out_ += '\n';
}

void TextWriter::Histogram(std::string_view name, std::initializer_list<Label> labels,
                           const HistogramSnapshot& histogram) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kLatencyBuckets; ++i) {
    cumulative += histogram.counts[i];
    Label le{"le", i < kLatencyBoundLabels.size() ? kLatencyBoundLabels[i] : "+Inf"};
    SampleStart(name, "_bucket", labels, &le);
    out_ += std::to_string(cumulative);
    out_ += '\n';
  }
  SampleStart(name, "_sum", labels, nullptr);
  out_ += FormatValue(static_cast<double>(histogram.sum_ns) / 1e9);
  out_ += '\n';
  SampleStart(name, "_count", labels, nullptr);
  out_ += std::to_string(cumulative);
  out_ += '\n';
}

}  // namespace remold::prometheus
