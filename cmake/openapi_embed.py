#!/usr/bin/env python3
"""Writes docs/openapi.yaml as JSON inside a C++ string constant (the server answers it at
GET /openapi.json). Run by the build: openapi_embed.py IN.yaml OUT.cc VERSION (info.version
becomes the project's version). PyYAML is Debian's
python3-yaml; the YAML is the source so that people read and edit it, JSON what clients fetch."""
import json
import sys

import yaml

DELIMITER = ")DQ_OPENAPI\""

with open(sys.argv[1], encoding="utf-8") as f:
    doc = yaml.safe_load(f)
doc["info"]["version"] = sys.argv[3]
text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
if DELIMITER in text:
    sys.exit("docs/openapi.yaml contains the raw-string delimiter " + DELIMITER)
out = ("// Generated from docs/openapi.yaml by cmake/openapi_embed.py; do not edit.\n"
       "namespace delayq::http::handlers {\nextern const char kOpenApiJson[];\n"
       f"const char kOpenApiJson[] = R\"DQ_OPENAPI({text}{DELIMITER};\n}}  // namespace delayq::http::handlers\n")


def write_if_changed(path, content):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == content:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)


write_if_changed(sys.argv[2], out)
write_if_changed(sys.argv[2].rsplit(".", 1)[0] + ".json", text)  # the plain JSON, for tests/openapi
