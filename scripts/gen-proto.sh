#!/usr/bin/env bash
# Regenerates invoker/fpc/activation_pb2.py (and its .pyi) from invoker/fpc/activation.proto.
# The generated module is committed, so that the service needs only grpcio and protobuf at
# run time; grpcio-tools (the test extra) is the generator. Run after editing the .proto;
# tests/unit/invoker/fpc/test_activation_proto.py fails while the two differ.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
# grpc_tools.protoc adds its bundled include path (google/protobuf/wrappers.proto) itself.
"$PY" -m grpc_tools.protoc -I invoker/fpc --python_out=invoker/fpc --pyi_out=invoker/fpc \
    invoker/fpc/activation.proto
