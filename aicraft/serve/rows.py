"""rows.py - the service's own JSON endpoints for a classifier, kept from demos/serve.py:

    POST /predict  {"inputs": [[features], ...]}                      -> {"classes": [...], "probs": [[...], ...]}
    POST /learn    {"inputs": [[features], ...], "labels": [int, ...]} -> {"loss": float}

on the first model make_app serves, whose first input takes float rows (-1, features)
and whose first output is one logit per class. 1 to MAX_ROWS rows a request.
"""
import math

import orjson

import aicraft as ac
from aicraft.serve import wire
from aicraft.serve.protocol import ProtocolError

MAX_ROWS = 256


def read_json(body, keys):
    """body as a JSON object with exactly `keys`; ProtocolError (400) when it is not one."""
    # A valid body has a list per row (MAX_ROWS at most) and one per key (the list
    # of rows, the labels): one with more is refused unparsed, so that a long list
    # never becomes Python objects.
    if body.count(b"[") > MAX_ROWS + len(keys):
        raise ProtocolError(400, "inputs must be a list of 1 to %d rows" % MAX_ROWS)
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:   # also for bad UTF-8 and nesting past 1024
        raise ProtocolError(400, "the body is not JSON: %s" % str(exc)[:200]) from None
    if not isinstance(payload, dict) or set(payload) != set(keys):
        raise ProtocolError(400, "the body must be a JSON object with the keys %s" % ", ".join(keys))
    # A string "1.5" or a true would pass for a number. A valid body has no strings
    # but its keys, and no 'r' or 'f' (the keys have neither; of JSON's other
    # tokens only true, false and Infinity do): three byte scans, not a walk
    # over every value.
    if body.count(b'"') != 2 * len(keys) or b"r" in body or b"f" in body:
        raise ProtocolError(400, "inputs and labels must be numbers")
    return payload


def as_rows(rows, features):
    """rows (lists of `features` numbers) as a (n, features) FP32 wire Array."""
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_ROWS:
        raise ProtocolError(400, "inputs must be a list of 1 to %d rows" % MAX_ROWS)
    try:
        if wire.flat(rows)[1] == (len(rows), features):
            return wire.from_json(rows, "FP32", (len(rows), features), may_hold_bools=False)
    except wire.OutOfRange:
        raise ProtocolError(400, "inputs must be finite float32 numbers") from None
    except wire.WireError:
        pass
    raise ProtocolError(400, "inputs must be rows of %d numbers each" % features)


def as_labels(labels, rows, classes):
    """labels (ints in [0, classes), one per row) as an INT64 wire Array."""
    if not isinstance(labels, list) or len(labels) != rows:
        raise ProtocolError(400, "labels must be a list of %d class indices, one per row" % rows)
    if not all(type(v) is int and 0 <= v < classes for v in labels):
        raise ProtocolError(400, "labels must be integers in [0, %d)" % classes)
    return wire.from_json(labels, "INT64", (rows,), may_hold_bools=False)


def widths(servable):
    """(features, classes) of a classifier servable; ProtocolError (409) when it is not one."""
    first_in, first_out = servable.inputs[0], servable.outputs[0]
    if first_in.datatype != "FP32" or len(first_in.shape) != 2 or len(first_out.shape) != 2 \
            or first_in.shape[1] < 0 or first_out.shape[1] < 0:
        raise ProtocolError(409, "model %r: /predict and /learn take a model of FP32 rows (-1, features) "
                            "giving (-1, classes); use /v2/models/%s/infer" % (servable.name, servable.name))
    return first_in.shape[1], first_out.shape[1]


def predict(servable, run, body):
    """The /predict answer: run (the servable's infer on wire Arrays, or its batcher's
    submit) on the rows; the probabilities are the logits' softmax, in libac."""
    features, classes = widths(servable)
    x = as_rows(read_json(body, ("inputs",))["inputs"], features)
    logits = wire.to_tensor(run({servable.inputs[0].name: x})[servable.outputs[0].name])
    probs = ac.softmax(logits, 1)
    try:
        values = wire.to_json(wire.from_tensor(probs, "FP32"))
    except ValueError:    # orjson would write NaN as null
        raise ValueError("predict: the model's output is not finite; has /learn diverged?") from None
    return {"classes": wire.to_json(wire.from_tensor(probs.argmax(1), "INT64")),
            "probs": [values[i:i + classes] for i in range(0, len(values), classes)]}


def learn(servable, body):
    """The /learn answer: one step of servable.learn on the rows and labels."""
    features, classes = widths(servable)
    payload = read_json(body, ("inputs", "labels"))
    x = as_rows(payload["inputs"], features)
    labels = as_labels(payload["labels"], len(x), classes)
    loss = learn_arrays(servable, {servable.inputs[0].name: x}, labels)
    if not math.isfinite(loss):
        raise ValueError("learn: the loss is not finite; the step has diverged")
    return {"loss": loss}


def learn_arrays(servable, inputs, targets, **options):
    """servable.learn on wire Arrays, as it takes them (aicraft tensors or NumPy arrays)."""
    as_input = wire.input_maker(servable)
    return servable.learn({name: as_input(a) for name, a in inputs.items()}, as_input(targets), **options)
