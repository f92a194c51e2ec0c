"""The committed activation_pb2.py says what activation.proto says (scripts/gen-proto.sh
regenerates it), and the .proto has the scheduler's names and numbers."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc  # the test extra's grpcio-tools: the generator

from invoker.fpc import activation_pb2

PROTO_DIR = Path(__file__).resolve().parents[4] / "invoker" / "fpc"


def generated(tmp_path: Path) -> descriptor_pb2.FileDescriptorProto:
    out = tmp_path / "activation.desc"
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/wrappers.proto
    rc = protoc.main(
        [
            "protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--descriptor_set_out={out}",
            str(PROTO_DIR / "activation.proto"),
        ]
    )
    assert rc == 0, "protoc could not compile invoker/fpc/activation.proto"
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    proto = next(f for f in files if f.name == "activation.proto")
    for message in proto.message_type:  # the Python generator leaves out default JSON names
        for f in message.field:
            f.ClearField("json_name")
    return proto


def test_the_committed_module_is_generated_from_the_proto(tmp_path):
    committed = descriptor_pb2.FileDescriptorProto.FromString(
        activation_pb2.DESCRIPTOR.serialized_pb
    )
    assert committed == generated(tmp_path), "run scripts/gen-proto.sh and commit the result"


def test_the_messages_and_service_have_the_schedulers_names_and_numbers():
    d = activation_pb2.DESCRIPTOR
    assert d.package == "activation"

    def numbers(message: str) -> dict[str, int]:
        return {f.name: f.number for f in d.message_types_by_name[message].fields}

    assert numbers("FetchRequest") == {
        "transactionId": 1,
        "invocationNamespace": 2,
        "fqn": 3,
        "rev": 4,
        "containerId": 5,
        "warmed": 6,
        "lastDuration": 7,
        "alive": 8,
    }
    last = d.message_types_by_name["FetchRequest"].fields_by_name["lastDuration"]
    assert last.message_type.full_name == "google.protobuf.Int64Value"
    assert numbers("FetchResponse") == {"activationMessage": 1}
    assert numbers("RescheduleRequest") == {
        "invocationNamespace": 1,
        "fqn": 2,
        "rev": 3,
        "activationMessage": 4,
    }
    assert numbers("RescheduleResponse") == {"isRescheduled": 1}
    service = d.services_by_name["ActivationService"]
    assert {m.name: (m.input_type.name, m.output_type.name) for m in service.methods} == {
        "FetchActivation": ("FetchRequest", "FetchResponse"),
        "RescheduleActivation": ("RescheduleRequest", "RescheduleResponse"),
    }
