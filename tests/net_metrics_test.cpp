// /metrics (src/net/metrics.h): the rendered text is parsed back line by line
// as a scraper would read it (format 0.0.4): every sample belongs to a family
// declared before it, histogram buckets are cumulative and end at +Inf with
// _count, counts equal the observations made, label values round-trip their
// escapes. When Debian's python3-prometheus-client is installed, its parser
// must read the same samples (skipped otherwise).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "net/metrics.h"

namespace bonfire::net {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> type, help;
  std::vector<std::string> family_order;
  std::vector<Sample> samples;

  std::vector<Sample> find(const std::string& name, const std::map<std::string, std::string>& with = {}) const {
    std::vector<Sample> out;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : with) match = match && s.labels.count(k) && s.labels.at(k) == v;
      if (match) out.push_back(s);
    }
    return out;
  }
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    auto v = find(name, labels);
    if (v.size() != 1) {
      ADD_FAILURE() << name << ": " << v.size() << " samples match";
      return NAN;
    }
    return v[0].value;
  }
};

double parse_value(const std::string& s) {
  if (s == "+Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  if (s == "NaN") return NAN;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) ADD_FAILURE() << "bad value '" << s << "'";
  return v;
}

// The family a sample name belongs to: histograms add _bucket/_sum/_count.
std::string family_of(const std::string& name, const std::map<std::string, std::string>& type) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = type.find(base);
      if (it != type.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

// One sample line: name, optional {labels}, a space, the value.
void parse_sample(const std::string& line, Sample* out) {
  ASSERT_FALSE(line.empty() || line[0] == '#') << "unexpected line";
  size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == ':'))
    ++i;
  out->name = line.substr(0, i);
  ASSERT_FALSE(out->name.empty());
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      ASSERT_NE(eq, std::string::npos);
      const std::string key = line.substr(i, eq - i);
      ASSERT_LT(eq + 1, line.size());
      ASSERT_EQ(line[eq + 1], '"');
      std::string v;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\') {
          ASSERT_LT(j + 1, line.size());
          const char c = line[++j];
          ASSERT_TRUE(c == '\\' || c == '"' || c == 'n') << "bad escape \\" << c;
          v += c == 'n' ? '\n' : c;
        } else {
          v += line[j];
        }
      }
      ASSERT_LT(j, line.size()) << "unterminated label value";
      EXPECT_FALSE(out->labels.count(key)) << "label twice";
      out->labels[key] = v;
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    ASSERT_LT(i, line.size());
    ++i;  // '}'
  }
  ASSERT_LT(i, line.size());
  ASSERT_EQ(line[i], ' ');
  out->value = parse_value(line.substr(i + 1));
}

// A strict reader of the text format; malformed lines fail the test.
Exposition parse(const std::string& text) {
  Exposition e;
  if (!text.empty() && text.back() != '\n') ADD_FAILURE() << "the exposition must end with a newline";
  std::istringstream in(text);
  std::string line, current;
  std::set<std::string> closed;  // families whose samples are over
  while (std::getline(in, line)) {
    SCOPED_TRACE(line);
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool is_help = line[2] == 'H';
      const size_t sp = line.find(' ', 7);
      const std::string name = line.substr(7, sp - 7);
      const std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
      if (is_help) {
        EXPECT_FALSE(e.help.count(name)) << "HELP twice";
        std::string h;  // unescape \\ and \n
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] == '\\' && i + 1 < rest.size()) {
            ++i;
            h += rest[i] == 'n' ? '\n' : rest[i];
            EXPECT_TRUE(rest[i] == 'n' || rest[i] == '\\') << "bad HELP escape";
          } else {
            h += rest[i];
          }
        }
        e.help[name] = h;
      } else {
        EXPECT_FALSE(e.type.count(name)) << "TYPE twice";
        EXPECT_TRUE(e.help.count(name)) << "TYPE without HELP before it";
        EXPECT_TRUE(rest == "counter" || rest == "gauge" || rest == "histogram") << rest;
        e.type[name] = rest;
        e.family_order.push_back(name);
        if (!current.empty()) closed.insert(current);
        current = name;
      }
      continue;
    }
    Sample s;
    parse_sample(line, &s);
    if (::testing::Test::HasFatalFailure()) return e;
    const std::string fam = family_of(s.name, e.type);
    EXPECT_EQ(fam, current) << "sample outside its family's block";
    EXPECT_FALSE(closed.count(fam));
    e.samples.push_back(s);
  }
  return e;
}

// Checks one histogram series (the samples whose labels include `labels`)
// against the values observed into it; returns nothing, fails on mismatch.
void check_histogram(const Exposition& e, const std::string& name, const std::map<std::string, std::string>& labels,
                     const std::vector<double>& bounds, const std::vector<double>& observed) {
  SCOPED_TRACE(name);
  EXPECT_EQ(e.type.at(name), "histogram");
  const auto buckets = e.find(name + "_bucket", labels);
  ASSERT_EQ(buckets.size(), bounds.size() + 1);
  double prev_le = -1, prev_count = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const std::string le = buckets[i].labels.at("le");
    const double bound = parse_value(le);
    if (i < bounds.size()) {
      EXPECT_EQ(bound, bounds[i]);
    } else {
      EXPECT_EQ(le, "+Inf");
    }
    EXPECT_GT(bound, prev_le) << "le not ascending";
    EXPECT_GE(buckets[i].value, prev_count) << "buckets not cumulative";
    const double want = static_cast<double>(
        std::count_if(observed.begin(), observed.end(), [&](double v) { return std::max(v, 0.0) <= bound; }));
    EXPECT_EQ(buckets[i].value, want) << "le=" << le;
    prev_le = bound;
    prev_count = buckets[i].value;
  }
  EXPECT_EQ(e.value(name + "_count", labels), static_cast<double>(observed.size()));
  EXPECT_EQ(buckets.back().value, static_cast<double>(observed.size()));
  double sum = 0;
  for (double v : observed) sum += std::max(v, 0.0);
  EXPECT_NEAR(e.value(name + "_sum", labels), sum, 1e-9 * std::max(1.0, sum));
}

TEST(NetMetrics, EmptyRenderDeclaresEveryFamily) {
  const Metrics m;
  const Exposition e = parse(m.render({}));
  EXPECT_EQ(e.family_order,
            (std::vector<std::string>{"bonfire_http_requests_total", "bonfire_http_request_duration_seconds",
                                      "bonfire_time_to_first_token_seconds", "bonfire_decode_step_seconds",
                                      "bonfire_tokens_total", "bonfire_worker_events_total"}));
  EXPECT_EQ(e.type.at("bonfire_http_requests_total"), "counter");
  EXPECT_TRUE(e.find("bonfire_http_requests_total").empty());
  check_histogram(e, "bonfire_time_to_first_token_seconds", {}, Metrics::ttft_buckets(), {});
  check_histogram(e, "bonfire_decode_step_seconds", {}, Metrics::step_buckets(), {});
  // Known label values start at 0 so rate() sees their first increment.
  EXPECT_EQ(e.value("bonfire_tokens_total", {{"kind", "prompt"}}), 0);
  EXPECT_EQ(e.value("bonfire_tokens_total", {{"kind", "generated"}}), 0);
  for (const char* ev : {"joined", "left", "refused", "failover"})
    EXPECT_EQ(e.value("bonfire_worker_events_total", {{"event", ev}}), 0) << ev;
}

TEST(NetMetrics, BucketsAreSensible) {
  for (const auto* b : {&Metrics::request_buckets(), &Metrics::ttft_buckets(), &Metrics::step_buckets()}) {
    EXPECT_TRUE(std::is_sorted(b->begin(), b->end()));
    EXPECT_TRUE(std::adjacent_find(b->begin(), b->end()) == b->end());
    EXPECT_LE(b->front(), 0.005);
    EXPECT_GE(b->back(), 10);
  }
  EXPECT_EQ(Metrics::ttft_buckets().back(), 60);
  EXPECT_GE(Metrics::request_buckets().back(), 60);
}

TEST(NetMetrics, Counters) {
  Metrics m;
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 400);
  m.count_request("/api/v3/graph", 503);
  m.add_tokens("prompt", 12);
  m.add_tokens("prompt", 30);
  m.add_tokens("generated", 7);
  m.add_tokens("generated", 0);
  m.add_tokens("generated", -5);  // a counter never goes down
  m.count_worker_event("joined");
  m.count_worker_event("joined");
  m.count_worker_event("failover");
  const Exposition e = parse(m.render({}));
  EXPECT_EQ(e.value("bonfire_http_requests_total", {{"endpoint", "/v1/completions"}, {"status", "200"}}), 2);
  EXPECT_EQ(e.value("bonfire_http_requests_total", {{"endpoint", "/v1/completions"}, {"status", "400"}}), 1);
  EXPECT_EQ(e.value("bonfire_http_requests_total", {{"endpoint", "/api/v3/graph"}, {"status", "503"}}), 1);
  EXPECT_EQ(e.find("bonfire_http_requests_total").size(), 3u);
  EXPECT_EQ(e.value("bonfire_tokens_total", {{"kind", "prompt"}}), 42);
  EXPECT_EQ(e.value("bonfire_tokens_total", {{"kind", "generated"}}), 7);
  EXPECT_EQ(e.value("bonfire_worker_events_total", {{"event", "joined"}}), 2);
  EXPECT_EQ(e.value("bonfire_worker_events_total", {{"event", "failover"}}), 1);
  EXPECT_EQ(e.value("bonfire_worker_events_total", {{"event", "left"}}), 0);
}

TEST(NetMetrics, Histograms) {
  Metrics m;
  // Bucket edges (le is inclusive), values between, past the last bound.
  const std::vector<double> ttft = {0.001, 0.005, 0.0051, 0.7, 1, 59.9, 60, 100, 1e9};
  for (double v : ttft) m.observe_ttft_seconds(v);
  const std::vector<double> step = {0.0004, 0.001, 0.02, 0.02, 3};
  for (double v : step) m.observe_step_seconds(v);
  const std::vector<double> chat = {0.2, 1.5, 45, 250, 1000};
  const std::vector<double> graph = {0.003};
  for (double v : chat) m.observe_request_seconds("/v1/chat/completions", v);
  for (double v : graph) m.observe_request_seconds("/api/v3/graph", v);

  const Exposition e = parse(m.render({}));
  check_histogram(e, "bonfire_time_to_first_token_seconds", {}, Metrics::ttft_buckets(), ttft);
  check_histogram(e, "bonfire_decode_step_seconds", {}, Metrics::step_buckets(), step);
  check_histogram(e, "bonfire_http_request_duration_seconds", {{"endpoint", "/v1/chat/completions"}},
                  Metrics::request_buckets(), chat);
  check_histogram(e, "bonfire_http_request_duration_seconds", {{"endpoint", "/api/v3/graph"}},
                  Metrics::request_buckets(), graph);
  EXPECT_EQ(e.find("bonfire_http_request_duration_seconds_count").size(), 2u);
}

TEST(NetMetrics, NanIsDroppedNegativeCountsAsZero) {
  Metrics m;
  m.observe_step_seconds(NAN);
  m.observe_step_seconds(-0.5);
  m.observe_step_seconds(0.002);
  const Exposition e = parse(m.render({}));
  check_histogram(e, "bonfire_decode_step_seconds", {}, Metrics::step_buckets(), {-0.5, 0.002});
  EXPECT_EQ(e.value("bonfire_decode_step_seconds_bucket", {{"le", "0.001"}}), 1);
}

TEST(NetMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(prom_escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(prom_label("worker", "w\"1"), "worker=\"w\\\"1\"");
  Metrics m;
  const std::string odd = "/x\"y\\z\nw{a=b},c";
  m.count_request(odd, 200);
  m.observe_request_seconds(odd, 0.1);
  const std::string text = m.render({});
  EXPECT_NE(text.find("endpoint=\"/x\\\"y\\\\z\\nw{a=b},c\""), std::string::npos) << text;
  const Exposition e = parse(text);
  EXPECT_EQ(e.value("bonfire_http_requests_total", {{"endpoint", odd}, {"status", "200"}}), 1);
  check_histogram(e, "bonfire_http_request_duration_seconds", {{"endpoint", odd}}, Metrics::request_buckets(), {0.1});
}

TEST(NetMetrics, Gauges) {
  Metrics m;
  const std::vector<Metrics::Gauge> gauges = {
      {"bonfire_workers_connected", "Workers connected now.", {{"", 3}}},
      {"bonfire_worker_load",
       "Generations running on each worker.\nA back\\slash.",
       {{prom_label("worker", "w1"), 0.5}, {prom_label("worker", "w\"2") + "," + prom_label("model", "m"), 2}}},
      {"bonfire_queue_depth", "Requests waiting.", {}},
      {"bonfire_odd_values", "Non-finite values.", {{prom_label("v", "inf"), INFINITY}, {prom_label("v", "nan"), NAN}}},
  };
  const std::string text = m.render(gauges);
  EXPECT_NE(text.find("\nbonfire_workers_connected 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP bonfire_worker_load Generations running on each worker.\\nA back\\\\slash.\n"),
            std::string::npos);
  const Exposition e = parse(text);
  EXPECT_EQ(e.family_order.size(), 10u);
  EXPECT_EQ(e.family_order.back(), "bonfire_odd_values");
  EXPECT_EQ(e.type.at("bonfire_workers_connected"), "gauge");
  EXPECT_EQ(e.help.at("bonfire_worker_load"), "Generations running on each worker.\nA back\\slash.");
  EXPECT_EQ(e.value("bonfire_workers_connected"), 3);
  EXPECT_EQ(e.value("bonfire_worker_load", {{"worker", "w1"}}), 0.5);
  EXPECT_EQ(e.value("bonfire_worker_load", {{"worker", "w\"2"}, {"model", "m"}}), 2);
  EXPECT_TRUE(e.find("bonfire_queue_depth").empty());
  EXPECT_EQ(e.type.at("bonfire_queue_depth"), "gauge");
  EXPECT_TRUE(std::isinf(e.value("bonfire_odd_values", {{"v", "inf"}})));
  EXPECT_TRUE(std::isnan(e.value("bonfire_odd_values", {{"v", "nan"}})));
}

TEST(NetMetrics, Numbers) {
  EXPECT_EQ(prom_number(0.005), "0.005");
  EXPECT_EQ(prom_number(60), "60");
  EXPECT_EQ(prom_number(-2.5), "-2.5");
  EXPECT_EQ(prom_number(INFINITY), "+Inf");
  EXPECT_EQ(prom_number(-INFINITY), "-Inf");
  EXPECT_EQ(prom_number(NAN), "NaN");
  for (double v : {0.1, 1.0 / 3, 1e-7, 123456789.125, 6.02e23})
    EXPECT_EQ(std::strtod(prom_number(v).c_str(), nullptr), v);
}

TEST(NetMetrics, ConcurrentUpdatesAreAllCounted) {
  Metrics m;
  const int threads = 4, per = 2000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < per; ++i) {
        m.count_request("/v1/completions", 200);
        m.observe_request_seconds(t % 2 ? "/a" : "/b", 0.01);
        m.observe_step_seconds(0.003);
        m.add_tokens("generated", 2);
        if (i % 100 == 0) m.render({});  // scrapes during updates
      }
    });
  for (auto& th : pool) th.join();
  const Exposition e = parse(m.render({}));
  EXPECT_EQ(e.value("bonfire_http_requests_total", {{"endpoint", "/v1/completions"}, {"status", "200"}}),
            threads * per);
  EXPECT_EQ(e.value("bonfire_decode_step_seconds_count"), threads * per);
  EXPECT_EQ(e.value("bonfire_http_request_duration_seconds_count", {{"endpoint", "/a"}}), threads / 2 * per);
  EXPECT_EQ(e.value("bonfire_tokens_total", {{"kind", "generated"}}), 2.0 * threads * per);
}

// The reference reader: prometheus_client's text parser (Debian's
// python3-prometheus-client) must see exactly the samples this test's parser
// sees. Not required: skipped where the package is missing.
TEST(NetMetrics, PrometheusClientParserAgrees) {
  if (std::system("/usr/bin/python3 -c 'import prometheus_client.parser' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-prometheus-client is not installed";
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/x\"y\\z\nw", 404);
  m.observe_request_seconds("/v1/chat/completions", 1.7);
  m.observe_request_seconds("/x\"y\\z\nw", 0.02);
  m.observe_ttft_seconds(0.4);
  m.observe_step_seconds(0.03);
  m.add_tokens("prompt", 5);
  m.count_worker_event("refused");
  const std::string text = m.render({{"bonfire_worker_load",
                                      "Load per \"worker\".\nSecond line.",
                                      {{prom_label("worker", "w\\1"), 0.25}, {prom_label("worker", "w2"), 1}}},
                                     {"bonfire_workers_connected", "Workers.", {{"", 2}}}});

  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("bonfire_metrics_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.txt") << text;
  std::ofstream(dir / "read.py") << R"(import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        out.append([s.name, s.labels, repr(float(s.value)), fam.type, fam.documentation])
print(json.dumps(out))
)";
  const std::string cmd = "/usr/bin/python3 " + (dir / "read.py").string() + " " + (dir / "metrics.txt").string() +
                          " > " + (dir / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "prometheus_client could not parse:\n" << text;
  const auto ref = nlohmann::json::parse(std::ifstream(dir / "out.json"));
  fs::remove_all(dir);

  const Exposition e = parse(text);
  using Key = std::pair<std::string, std::map<std::string, std::string>>;
  std::map<Key, double> ours, theirs;
  for (const auto& s : e.samples) ours[{s.name, s.labels}] = s.value;
  for (const auto& r : ref) {
    theirs[{r[0].get<std::string>(), r[1].get<std::map<std::string, std::string>>()}] =
        std::strtod(r[2].get<std::string>().c_str(), nullptr);
    if (r[0] == "bonfire_worker_load") {
      EXPECT_EQ(r[4], "Load per \"worker\".\nSecond line.");
    }
  }
  EXPECT_EQ(ours.size(), e.samples.size());
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(ours.at({"bonfire_http_requests_total", {{"endpoint", "/x\"y\\z\nw"}, {"status", "404"}}}), 1);
}

}  // namespace
}  // namespace bonfire::net
