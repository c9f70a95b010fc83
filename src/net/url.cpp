#include "net/url.h"

#include <utility>

#include "core/error.h"

namespace bonfire::net {

Url parse_join_url(const std::string& url) {
  std::string rest;
  Url u;
  static const std::pair<std::string, bool> kSchemes[] = {
      {"http://", false}, {"ws://", false}, {"https://", true}, {"wss://", true}};
  bool found = false;
  for (const auto& [scheme, tls] : kSchemes) {
    if (url.rfind(scheme, 0) != 0) continue;
    rest = url.substr(scheme.size());
    u.tls = tls;
    found = true;
    break;
  }
  if (!found)
    throw Error(ErrorCode::BadGraph,
                url + ": expected http://host:port, https://host:port or ws(s)://host:port/api/v3/worker");
  const size_t slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  const size_t colon = hostport.rfind(':');
  u.host = hostport.substr(0, colon);
  u.port = colon == std::string::npos ? (u.tls ? "443" : "80") : hostport.substr(colon + 1);
  if (u.host.empty()) throw Error(ErrorCode::BadGraph, url + ": no host");
  if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos)
    throw Error(ErrorCode::BadGraph, url + ": the port is not a number");
  u.path = path.empty() || path == "/" ? "/api/v3/worker" : path;
  return u;
}

}  // namespace bonfire::net
