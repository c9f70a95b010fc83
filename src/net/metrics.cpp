#include "net/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace bonfire::net {

std::string prom_escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string prom_label(const std::string& name, const std::string& value) {
  return name + "=\"" + prom_escape_label_value(value) + "\"";
}

std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

// HELP text escapes only backslash and newline (quotes are literal there).
std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void header(std::string& out, const std::string& name, const std::string& type, const std::string& help) {
  out += "# HELP " + name + " " + escape_help(help) + "\n";
  out += "# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, const std::string& value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + value + "\n";
}

}  // namespace

const std::vector<double>& Metrics::request_buckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
  return b;
}
const std::vector<double>& Metrics::ttft_buckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return b;
}
const std::vector<double>& Metrics::step_buckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return b;
}

Metrics::Metrics() {
  for (const char* k : {"prompt", "generated"}) tokens_[k] = 0;
  for (const char* e : {"joined", "left", "refused", "failover"}) worker_events_[e] = 0;
}

// NaN would turn _sum into NaN for the life of the process, so it is dropped;
// a negative duration can only be clock trouble and counts as 0.
void Metrics::Histogram::observe(double s) {
  if (std::isnan(s)) return;
  s = std::max(s, 0.0);
  const size_t i = std::lower_bound(bounds->begin(), bounds->end(), s) - bounds->begin();  // first le >= s
  ++counts[i];
  sum += s;
  ++count;
}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::observe_request_seconds(const std::string& endpoint, double s) {
  std::lock_guard<std::mutex> lock(mu_);
  request_seconds_.try_emplace(endpoint, request_buckets()).first->second.observe(s);
}

void Metrics::observe_ttft_seconds(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(s);
}

void Metrics::observe_step_seconds(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  step_.observe(s);
}

void Metrics::add_tokens(const std::string& kind, int64_t n) {
  if (n <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  tokens_[kind] += static_cast<uint64_t>(n);
}

void Metrics::count_worker_event(const std::string& event) {
  std::lock_guard<std::mutex> lock(mu_);
  ++worker_events_[event];
}

void Metrics::render_histogram(std::string& out, const std::string& name, const std::string& labels,
                               const Histogram& h) {
  const std::string prefix = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.bounds->size(); ++i) {
    cumulative += h.counts[i];
    const std::string le = i < h.bounds->size() ? prom_number((*h.bounds)[i]) : "+Inf";
    sample(out, name + "_bucket", prefix + prom_label("le", le), std::to_string(cumulative));
  }
  sample(out, name + "_sum", labels, prom_number(h.sum));
  sample(out, name + "_count", labels, std::to_string(h.count));
}

std::string Metrics::render(const std::vector<Gauge>& gauges) const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);

  header(out, "bonfire_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    sample(out, "bonfire_http_requests_total",
           prom_label("endpoint", key.first) + "," + prom_label("status", std::to_string(key.second)),
           std::to_string(n));

  header(out, "bonfire_http_request_duration_seconds", "histogram",
         "Time from a request's arrival to its last byte, by endpoint.");
  for (const auto& [endpoint, h] : request_seconds_)
    render_histogram(out, "bonfire_http_request_duration_seconds", prom_label("endpoint", endpoint), h);

  header(out, "bonfire_time_to_first_token_seconds", "histogram",
         "Time from a generation request's arrival to its first generated token.");
  render_histogram(out, "bonfire_time_to_first_token_seconds", "", ttft_);

  header(out, "bonfire_decode_step_seconds", "histogram", "Time of one decode step (one generated token).");
  render_histogram(out, "bonfire_decode_step_seconds", "", step_);

  header(out, "bonfire_tokens_total", "counter", "Tokens processed: prompt tokens prefilled, tokens generated.");
  for (const auto& [kind, n] : tokens_)
    sample(out, "bonfire_tokens_total", prom_label("kind", kind), std::to_string(n));

  header(out, "bonfire_worker_events_total", "counter",
         "Worker link events: joined, left, refused (a worker turned away), failover (work moved off a lost worker).");
  for (const auto& [event, n] : worker_events_)
    sample(out, "bonfire_worker_events_total", prom_label("event", event), std::to_string(n));

  for (const auto& g : gauges) {
    header(out, g.name, g.type, g.help);
    for (const auto& [labels, v] : g.values) sample(out, g.name, labels, prom_number(v));
  }
  return out;
}

}  // namespace bonfire::net
