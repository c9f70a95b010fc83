// The coordinator's /metrics: counters and histograms it updates as requests
// run, rendered in Prometheus' text exposition format 0.0.4 together with
// gauges the caller computes at scrape time.
//
// Families, in render order:
//   bonfire_http_requests_total{endpoint,status}            counter
//   bonfire_http_request_duration_seconds{endpoint}         histogram
//   bonfire_time_to_first_token_seconds                     histogram
//   bonfire_decode_step_seconds                             histogram
//   bonfire_tokens_total{kind="prompt"|"generated"}         counter
//   bonfire_worker_events_total{event="joined"|"left"|"refused"|"failover"} counter
//   then each caller gauge.
// The known token kinds and worker events start at 0, so rate() sees their
// first increment. `endpoint` should be a route ("/v1/chat/completions"),
// never a raw path: every label value is a series kept forever.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace bonfire::net {

// A label value escaped as the text format wants it: backslash, double quote
// and newline become \\, \" and \n.
std::string prom_escape_label_value(const std::string& value);
// name="value", escaped: what Gauge labels are built from (join several with ",").
std::string prom_label(const std::string& name, const std::string& value);
// A sample value: shortest round-trip decimal, or +Inf, -Inf, NaN.
std::string prom_number(double v);

class Metrics {  // thread-safe
 public:
  Metrics();

  // bonfire_http_requests_total{endpoint,status}
  void count_request(const std::string& endpoint, int status);
  // bonfire_http_request_duration_seconds{endpoint}
  void observe_request_seconds(const std::string& endpoint, double s);
  void observe_ttft_seconds(double s);  // bonfire_time_to_first_token_seconds
  void observe_step_seconds(double s);  // bonfire_decode_step_seconds
  // bonfire_tokens_total{kind}; n <= 0 is ignored (a counter never goes down).
  void add_tokens(const std::string& kind, int64_t n);
  void count_worker_event(const std::string& event);  // bonfire_worker_events_total{event}

  // A value computed at scrape time: a gauge, or a counter kept elsewhere
  // (a count since start, named *_total).
  struct Gauge {
    std::string name, help;
    // labels (built with prom_label, e.g. worker="w1"; "" for none), value
    std::vector<std::pair<std::string, double>> values;
    const char* type = "gauge";
  };
  // The text format 0.0.4: HELP and TYPE lines per family, histogram buckets
  // cumulative up to le="+Inf", then _sum and _count. `gauges` (workers
  // connected, queue depth, active generations, per-worker load...) are
  // computed by the caller at scrape time.
  std::string render(const std::vector<Gauge>& gauges) const;

  // Upper bounds of the histogram buckets (seconds), without +Inf.
  static const std::vector<double>& request_buckets();  // 5 ms … 5 min: whole generations
  static const std::vector<double>& ttft_buckets();     // 5 ms … 60 s
  static const std::vector<double>& step_buckets();     // 1 ms … 10 s: one decode step, local or remote

 private:
  struct Histogram {
    const std::vector<double>* bounds = nullptr;
    std::vector<uint64_t> counts;  // per bucket, not cumulative; one more for +Inf
    double sum = 0;
    uint64_t count = 0;
    explicit Histogram(const std::vector<double>& b) : bounds(&b), counts(b.size() + 1, 0) {}
    void observe(double s);
  };
  static void render_histogram(std::string& out, const std::string& name, const std::string& labels,
                               const Histogram& h);

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> request_seconds_;
  Histogram ttft_{ttft_buckets()}, step_{step_buckets()};
  std::map<std::string, uint64_t> tokens_;
  std::map<std::string, uint64_t> worker_events_;
};

}  // namespace bonfire::net
