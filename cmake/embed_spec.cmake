# Writes OUT, a C++ file that holds the vendored op manifest as a string.
file(READ ${SPEC_DIR}/ops-v3.json OPS)
file(WRITE ${OUT} "// generated from spec/ops-v3.json; do not edit\n#include <string_view>\nnamespace bonfire::spec {\nextern const std::string_view kOpsManifest;\nconst std::string_view kOpsManifest = R\"bonfire_spec(${OPS})bonfire_spec\";\n}\n")
