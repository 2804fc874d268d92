#!/usr/bin/env python3
"""A gRPC server on grpcio (Debian's python3-grpcio: gRPC's C core, another
codebase than headroom's), for headroom's gRPC tests.

    grpc_server.py PORT_FILE COUNTS_FILE [--no-reflection | --v1alpha-only]
                   [--proto-out FILE] [--protoset-out FILE] [--tls CERT KEY]
                   [--gzip]

Serves `demo.v1.Greeter` (its .proto is PROTO below; --proto-out writes it)
with messages decoded by python3-protobuf from a descriptor built here, and
the reflection service (grpc.reflection.v1 and v1alpha, written by hand over
raw bytes) unless told otherwise; --protoset-out writes its protoset;
--gzip compresses every answer's messages (gzip):

  SayHello  (unary)          "hello NAME"; NAME picks a status instead:
            "unavailable", "exhausted", "internal" -> that status;
            "slow:MS" -> answers after MS ms (counted as "slow" when it
            arrives); "big" -> a 10 MB message;
            "trailers-only" -> an error status with no message at all;
            "metadata" -> "NAME=VALUE ..." of the x-, -bin and traceparent
            metadata received, sorted (a -bin value as hex of its bytes);
            each such answer also listed in COUNTS_FILE's
            "metadata_echoed"
  Countdown (server stream)  `times` replies "NAME N", N = times..1; NAME
            "every:MS" -> MS ms before each reply (the call is counted
            as it arrives, each reply once gRPC has taken it)
  Collect   (client stream)  one reply "collected N NAMES"
  Chat      (bidirectional)  each request echoed "echo NAME"

Binds 127.0.0.1 on a free port and writes it to PORT_FILE. COUNTS_FILE
(JSON) is rewritten after each call: calls per method, statuses by name,
messages received and sent, and "connections": the distinct client
connections (peer addresses) calls came on.
"""
import json
import os
import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO = """syntax = "proto3";
package demo.v1;

message HelloRequest {
  string name = 1;
  int32 times = 2;
}

message HelloReply {
  string message = 1;
  int32 n = 2;
}

service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
  rpc Countdown (HelloRequest) returns (stream HelloReply);
  rpc Collect (stream HelloRequest) returns (HelloReply);
  rpc Chat (stream HelloRequest) returns (stream HelloReply);
}
"""

SERVICE = "demo.v1.Greeter"


def file_descriptor():
    """PROTO as a FileDescriptorProto (what protoc would make of it)."""
    f = descriptor_pb2.FileDescriptorProto(name="greeter.proto", package="demo.v1", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    req = f.message_type.add(name="HelloRequest")
    req.field.add(name="name", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL, json_name="name")
    req.field.add(name="times", number=2, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL, json_name="times")
    rep = f.message_type.add(name="HelloReply")
    rep.field.add(name="message", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL, json_name="message")
    rep.field.add(name="n", number=2, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL, json_name="n")
    s = f.service.add(name="Greeter")
    for name, cs, ss in [("SayHello", False, False), ("Countdown", False, True),
                         ("Collect", True, False), ("Chat", True, True)]:
        s.method.add(name=name, input_type=".demo.v1.HelloRequest", output_type=".demo.v1.HelloReply",
                     client_streaming=cs, server_streaming=ss)
    return f


FDP = file_descriptor()
pool = descriptor_pool.DescriptorPool()
pool.Add(FDP)
factory = message_factory.MessageFactory(pool)
HelloRequest = factory.GetPrototype(pool.FindMessageTypeByName("demo.v1.HelloRequest"))
HelloReply = factory.GetPrototype(pool.FindMessageTypeByName("demo.v1.HelloReply"))

lock = threading.Lock()
counts = {"calls": {}, "statuses": {}, "received": 0, "sent": 0, "connections": 0}
peers = set()
COUNTS_FILE = None


def save():
    tmp = COUNTS_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, COUNTS_FILE)


def counted(method, status="ok", received=0, sent=0, context=None):
    with lock:
        if context is not None:
            peers.add(context.peer())
            counts["connections"] = len(peers)
        counts["calls"][method] = counts["calls"].get(method, 0) + 1
        counts["statuses"][status] = counts["statuses"].get(status, 0) + 1
        counts["received"] += received
        counts["sent"] += sent
        save()


def reply(message, n=0):
    return HelloReply(message=message, n=n).SerializeToString()


def say_hello(raw, context):
    request = HelloRequest.FromString(raw)
    name = request.name
    errors = {"unavailable": grpc.StatusCode.UNAVAILABLE,
              "exhausted": grpc.StatusCode.RESOURCE_EXHAUSTED,
              "internal": grpc.StatusCode.INTERNAL,
              "trailers-only": grpc.StatusCode.FAILED_PRECONDITION}
    if name in errors:
        code = errors[name]
        counted("SayHello", code.name.lower(), received=1, context=context)
        context.abort(code, "asked for " + name)
    if name.startswith("slow:"):
        # Counted as it arrives: a deadline ends it before it answers.
        counted("SayHello", "slow", received=1, context=context)
        time.sleep(int(name[5:]) / 1000.0)
        return reply("too late")
    if name == "metadata":
        got = sorted("%s=%s" % (k, v.hex() if k.endswith("-bin") else v)
                     for k, v in context.invocation_metadata()
                     if k.startswith("x-") or k.endswith("-bin")
                     or k == "traceparent")
        with lock:
            counts.setdefault("metadata_echoed", []).append(" ".join(got))
        counted("SayHello", received=1, sent=1, context=context)
        return reply(" ".join(got))
    if name == "big":
        counted("SayHello", received=1, sent=1, context=context)
        return reply("x" * (10 * 1024 * 1024))
    counted("SayHello", received=1, sent=1, context=context)
    return reply("hello " + name)


def countdown(raw, context):
    request = HelloRequest.FromString(raw)
    # Counted as it arrives (a deadline may end it), each reply once gRPC
    # took it (the code after a yield runs when the next is asked for).
    counted("Countdown", "started", received=1, context=context)
    pause = int(request.name[6:]) / 1000.0 if request.name.startswith("every:") else 0
    for n in range(request.times, 0, -1):
        if pause:
            time.sleep(pause)
        yield reply("%s %d" % (request.name, n), n)
        with lock:
            counts["sent"] += 1
            save()


def collect(requests, context):
    names = [HelloRequest.FromString(raw).name for raw in requests]
    counted("Collect", received=len(names), sent=1, context=context)
    return reply("collected %d %s" % (len(names), " ".join(names)), len(names))


def chat(requests, context):
    received = 0
    for raw in requests:
        received += 1
        yield reply("echo " + HelloRequest.FromString(raw).name, received)
    counted("Chat", received=received, sent=received, context=context)


# The reflection service, over raw bytes: requests are read field by field.
def varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(data):
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, i = varint(data, i)
        elif kind == 2:
            n, i = varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise ValueError("field kind %d" % kind)
        yield number, value


def encode_varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def reflection_answer(raw):
    asked = dict(fields(raw))
    original = raw
    if 7 in asked:  # list_services
        services = b"".join(field(1, field(1, name.encode()))
                            for name in [SERVICE, "grpc.reflection.v1.ServerReflection"])
        body = field(6, services)
    elif 4 in asked and asked[4].decode() in (SERVICE, "demo.v1.HelloRequest", "demo.v1.HelloReply"):
        body = field(4, field(1, FDP.SerializeToString()))
    else:
        body = field(7, encode_varint(1 << 3 | 0) + encode_varint(5) + field(2, b"not found"))
    return field(2, original) + body


def reflection(requests, context):
    for raw in requests:
        yield reflection_answer(raw)


def main():
    global COUNTS_FILE
    args = sys.argv[1:]
    port_file, COUNTS_FILE = args[0], args[1]
    save()
    unary = grpc.unary_unary_rpc_method_handler
    handlers = {
        "SayHello": unary(say_hello),
        "Countdown": grpc.unary_stream_rpc_method_handler(countdown),
        "Collect": grpc.stream_unary_rpc_method_handler(collect),
        "Chat": grpc.stream_stream_rpc_method_handler(chat),
    }
    compression = grpc.Compression.Gzip if "--gzip" in args else None
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                         options=[("grpc.max_send_message_length", 64 << 20)],
                         compression=compression)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    reflections = []
    if "--no-reflection" not in args:
        reflections.append("grpc.reflection.v1alpha.ServerReflection")
        if "--v1alpha-only" not in args:
            reflections.append("grpc.reflection.v1.ServerReflection")
    for name in reflections:
        handler = grpc.stream_stream_rpc_method_handler(reflection)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler}),))
    if "--proto-out" in args:
        with open(args[args.index("--proto-out") + 1], "w") as f:
            f.write(PROTO)
    if "--protoset-out" in args:
        with open(args[args.index("--protoset-out") + 1], "wb") as f:
            f.write(descriptor_pb2.FileDescriptorSet(file=[FDP]).SerializeToString())
    if "--tls" in args:
        at = args.index("--tls")
        with open(args[at + 1], "rb") as c, open(args[at + 2], "rb") as k:
            credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
