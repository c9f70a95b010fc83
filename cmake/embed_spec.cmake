# Writes OUT, a C++ file that holds the vendored specs (the op manifest and
# the IR schema) as strings.
file(READ ${SPEC_DIR}/ops-v3.json OPS)
file(READ ${SPEC_DIR}/ir.schema.json IR_SCHEMA)
file(WRITE ${OUT} "// generated from spec/; do not edit\n#include <string_view>\nnamespace bonfire::spec {\nextern const std::string_view kOpsManifest;\nconst std::string_view kOpsManifest = R\"bonfire_spec(${OPS})bonfire_spec\";\nextern const std::string_view kIrSchema;\nconst std::string_view kIrSchema = R\"bonfire_spec(${IR_SCHEMA})bonfire_spec\";\n}\n")
