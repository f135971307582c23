"""protocol.py - KServe's Open Inference Protocol v2 over HTTP, as bytes in and wire
Arrays out (wire.py): infer requests read (JSON tensors, and the binary tensor data
extension: a JSON header of Inference-Header-Content-Length bytes, then each tensor's
raw little-endian bytes, `"parameters": {"binary_data_size": n}`), answers written the
same two ways, model and server metadata, and KServe's error bodies ({"error": "..."}).

No server and no model here: app.py routes requests and calls the servables.
The wire format: https://kserve.github.io/website/docs/concepts/architecture/data-plane/v2-protocol
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import orjson

from aicraft.serve import wire
from aicraft.serve.wire import FORMATS, ITEMSIZE, MAX_DIMS

# A JSON header may nest its data lists (one per row); past this many lists it is
# refused unparsed, so that a body of "[[[[..." never becomes Python objects.
MAX_JSON_LISTS = 4096
# What a JSON header's numbers are made of: deleted (bytes.translate, one pass at about
# 0.3 ns a byte), a large header leaves its keys, names and brackets, counted and
# searched in a few hundred bytes rather than in all of it.
NUMBER_BYTES = b"0123456789.,-+eE] \n\r\t"
SCAN_BYTES = 4096


@dataclass(frozen=True)
class TensorSpec:
    """A model's input or output: its name, OIP datatype and shape, -1 where any size
    goes (the batch dimension: (-1, 784))."""
    name: str
    datatype: str
    shape: tuple

    def __post_init__(self):
        if self.datatype not in FORMATS:
            raise ValueError("TensorSpec %r: datatype %r is not one of %s"
                             % (self.name, self.datatype, ", ".join(FORMATS)))
        shape = tuple(self.shape)
        if len(shape) > MAX_DIMS or not all(type(d) is int and d >= -1 for d in shape):
            raise ValueError("TensorSpec %r: shape %r must be at most %d sizes, each >= 0 or -1 (any)"
                             % (self.name, self.shape, MAX_DIMS))
        object.__setattr__(self, "shape", shape)      # a list given reads as the tuple it names

    def as_json(self):
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


class ProtocolError(Exception):
    """A request the service refuses: the HTTP status, and the message of its error body."""

    def __init__(self, status, message, headers=()):
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


def error_body(message):
    """KServe's error body."""
    return orjson.dumps({"error": message})


@dataclass
class InferRequest:
    """A parsed infer request: its id (echoed back), its inputs by name (wire Arrays), and
    the outputs it asks for as (name, binary) pairs; None asks for every output, in binary
    when binary_output (the request's "binary_data_output" parameter)."""
    id: Optional[str]
    inputs: Dict[str, wire.Array]
    outputs: Optional[List[Tuple[str, bool]]]
    binary_output: bool


# ---- reading a request ---------------------------------------------------------

def _object(value, what):
    if not isinstance(value, dict):
        raise ProtocolError(400, "%s must be a JSON object" % what)
    return value


def _parameters(item, what):
    return _object(item.get("parameters", {}), "%s's parameters" % what)


def parse_infer(body, header_length=None):
    """The InferRequest in body; header_length is the Inference-Header-Content-Length
    header's value (None without it: the body is all JSON). ProtocolError (400) for
    anything the protocol does not allow, naming what is wrong."""
    if header_length is None:
        header, tail = body, b""
    else:
        try:
            size = int(header_length)
        except ValueError:
            raise ProtocolError(400, "Inference-Header-Content-Length %r is not a number" % header_length) from None
        if not 0 < size <= len(body):
            raise ProtocolError(400, "Inference-Header-Content-Length is %d; the body has %d bytes"
                                % (size, len(body)))
        header, tail = body[:size], memoryview(body)[size:]
    # A small header (a binary request's, about 200 bytes) is searched as it is.
    words = header if len(header) <= SCAN_BYTES else header.translate(None, NUMBER_BYTES)
    if words.count(b"[") > MAX_JSON_LISTS:
        raise ProtocolError(400, "the request's JSON holds more than %d lists; send the data flat "
                            "or as binary" % MAX_JSON_LISTS)
    try:
        request = orjson.loads(header)
    except orjson.JSONDecodeError as exc:    # also for bad UTF-8, NaN, 1e400 and nesting past 1024
        raise ProtocolError(400, "the request is not JSON: %s" % str(exc)[:200]) from None
    _object(request, "the request")
    request_id = request.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise ProtocolError(400, "the request's id must be a string")
    binary_output = _parameters(request, "the request").get("binary_data_output", False)
    if not isinstance(binary_output, bool):
        raise ProtocolError(400, "binary_data_output must be true or false")
    items = request.get("inputs")
    if not isinstance(items, list) or not items:
        raise ProtocolError(400, "the request must have a non-empty list of inputs")
    may_hold_bools = b"tru" in words or b"fals" in words     # "true" lost its e
    inputs, offset = {}, 0
    for item in items:
        name, array, used = _read_input(_object(item, "each input"), tail, offset, may_hold_bools)
        if name in inputs:
            raise ProtocolError(400, "input %r is given twice" % name)
        inputs[name], offset = array, offset + used
    if offset != len(tail):
        raise ProtocolError(400, "the body has %d bytes after the JSON header; the inputs' "
                            "binary_data_size add up to %d" % (len(tail), offset))
    return InferRequest(request_id, inputs, _read_outputs(request.get("outputs")), binary_output)


def _read_input(item, tail, offset, may_hold_bools):
    """(name, wire Array, bytes of the binary tail it used) of one request input."""
    name = item.get("name")
    if not isinstance(name, str):
        raise ProtocolError(400, "each input needs a name")
    datatype = item.get("datatype")
    if datatype not in FORMATS:
        raise ProtocolError(400, "input %r: datatype %r is not one of %s"
                            % (name, datatype, ", ".join(FORMATS)))
    shape = item.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_DIMS
            or not all(type(d) is int and d >= 0 for d in shape)):
        raise ProtocolError(400, "input %r: shape must be a list of at most %d sizes >= 0" % (name, MAX_DIMS))
    parameters = _parameters(item, "input %r" % name)
    if "shared_memory_region" in parameters:
        raise ProtocolError(400, "input %r: this server takes no shared memory regions" % name)
    size = parameters.get("binary_data_size")
    try:
        if size is None:
            if "data" not in item:
                raise ProtocolError(400, "input %r has neither data nor binary_data_size" % name)
            return name, wire.from_json(item["data"], datatype, shape, may_hold_bools), 0
        if "data" in item:
            raise ProtocolError(400, "input %r has both data and binary_data_size" % name)
        if type(size) is not int or size < 0:
            raise ProtocolError(400, "input %r: binary_data_size must be an integer >= 0" % name)
        expected = wire.count(shape) * ITEMSIZE[datatype]
        if size != expected:
            raise ProtocolError(400, "input %r: binary_data_size is %d bytes; shape %s of %s takes %d"
                                % (name, size, shape, datatype, expected))
        if offset + size > len(tail):
            raise ProtocolError(400, "input %r: its %d bytes run past the end of the body" % (name, size))
        return name, wire.from_bytes(tail[offset:offset + size], datatype, shape), size
    except wire.WireError as exc:
        raise ProtocolError(400, "input %r: %s" % (name, exc)) from None


def _read_outputs(items):
    """The request's outputs as [(name, binary)], or None when it names none."""
    if items is None:
        return None
    if not isinstance(items, list):
        raise ProtocolError(400, "outputs must be a list")
    outputs = []
    for item in items:
        name = _object(item, "each output").get("name")
        if not isinstance(name, str):
            raise ProtocolError(400, "each output needs a name")
        parameters = _parameters(item, "output %r" % name)
        for unsupported in ("classification", "shared_memory_region"):
            if parameters.get(unsupported):
                raise ProtocolError(400, "output %r: this server does not take %s" % (name, unsupported))
        binary = parameters.get("binary_data", False)
        if not isinstance(binary, bool):
            raise ProtocolError(400, "output %r: binary_data must be true or false" % name)
        outputs.append((name, binary))
    return outputs


def check_inputs(inputs, specs):
    """ProtocolError (400) unless inputs (name -> wire Array) are exactly specs' names
    with their datatypes, and shapes that fit (-1 takes any size)."""
    names = {spec.name for spec in specs}
    for name in inputs:
        if name not in names:
            raise ProtocolError(400, "unexpected input %r; the model takes %s" % (name, ", ".join(sorted(names))))
    for spec in specs:
        array = inputs.get(spec.name)
        if array is None:
            raise ProtocolError(400, "input %r is missing" % spec.name)
        if array.datatype != spec.datatype:
            raise ProtocolError(400, "input %r is %s; the model takes %s" % (spec.name, array.datatype, spec.datatype))
        shape = array.shape
        if len(shape) != len(spec.shape) or any(want not in (-1, got) for want, got in zip(spec.shape, shape)):
            raise ProtocolError(400, "input %r has shape %s; the model takes %s (-1: any size)"
                                % (spec.name, list(shape), list(spec.shape)))


# ---- writing an answer ---------------------------------------------------------

def encode_infer(servable, request, results):
    """(body, headers) of the answer to request: results (output name -> wire Array, as
    the servable's output specs type them) for the outputs it asks for, each in JSON or
    in binary as asked. ProtocolError (400) for an output the servable does not have."""
    specs = {spec.name for spec in servable.outputs}
    wanted = request.outputs
    if wanted is None:
        wanted = [(spec.name, request.binary_output) for spec in servable.outputs]
    outputs, chunks = [], []
    for name, binary in wanted:
        if name not in specs:
            raise ProtocolError(400, "unknown output %r; the model gives %s" % (name, ", ".join(sorted(specs))))
        array = results[name]
        output = {"name": name, "datatype": array.datatype, "shape": list(array.shape)}
        if binary:
            output["parameters"] = {"binary_data_size": len(array.data)}
            chunks.append(array.data)
        else:
            try:
                output["data"] = wire.to_json(array)
            except ValueError as exc:    # never a silent wrong answer
                raise ValueError("output %r holds %s" % (name, exc)) from None
        outputs.append(output)
    answer = {"model_name": servable.name, "model_version": servable.version, "outputs": outputs}
    if request.id is not None:
        answer["id"] = request.id
    header = orjson.dumps(answer)
    if not chunks:
        return header, [("Content-Type", "application/json")]
    return b"".join([header] + chunks), [("Content-Type", "application/octet-stream"),
                                         ("Inference-Header-Content-Length", str(len(header)))]


def model_metadata(servable):
    return {"name": servable.name, "versions": [servable.version], "platform": servable.platform,
            "inputs": [spec.as_json() for spec in servable.inputs],
            "outputs": [spec.as_json() for spec in servable.outputs]}


def server_metadata(version):
    return {"name": "aicraft", "version": version, "extensions": ["binary_tensor_data"]}
