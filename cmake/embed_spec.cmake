# Writes OUT, a C++ file that holds the vendored specs (the op manifest, the
# IR schema and the QMoE kernel package) as strings, so a binary needs no
# files beside it.
file(READ ${SPEC_DIR}/ops-v3.json OPS)
file(READ ${SPEC_DIR}/ir.schema.json IR_SCHEMA)
file(READ ${SPEC_DIR}/kernels/qmoe.json QMOE)
set(text "// generated from spec/ by cmake/embed_spec.cmake; do not edit\n#include <string_view>\nnamespace bonfire::spec {\n")
foreach(pair "kOpsManifest;OPS" "kIrSchema;IR_SCHEMA" "kQmoePackage;QMOE")
  list(GET pair 0 name)
  list(GET pair 1 var)
  string(APPEND text "extern const std::string_view ${name};\nconst std::string_view ${name} = R\"bonfire_spec(${${var}})bonfire_spec\";\n")
endforeach()
string(APPEND text "}\n")
file(WRITE ${OUT} "${text}")
