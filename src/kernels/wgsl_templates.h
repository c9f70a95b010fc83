// The WGSL templates of the GPU passes (src/kernels/*/wgsl/*.wgsl.jinja),
// compiled into the binary by cmake/embed_wgsl.cmake, by file name.
//
// Promises: wgsl_template(name) is the file's text with every line
// `//! include OTHER` replaced by OTHER's text (itself expanded; a cycle or a
// missing file is Error(UnsupportedFeature) naming both), ready for the
// template engine. The include is the only step before rendering: the
// template engine has no `{% include %}`, and several passes share their
// weight-reading helpers.
#pragma once
#include <string>
#include <vector>

namespace bonfire::kernels {

std::string wgsl_template(const std::string& name);
std::vector<std::string> wgsl_template_names();

}  // namespace bonfire::kernels
