"""rnn.py - torch.nn.utils.rnn's pad_sequence: a batch from sequences of different
lengths, made with cat and stack, so gradients reach every sequence.
"""
from aicraft.creation import cat, full, stack
from aicraft.errors import ShapeError
from aicraft._args import _scalar
from aicraft.tensor import Tensor

__all__ = ["pad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences (L_i, *) into (max L, B, *), or (B, max L, *) with batch_first,
    filling the rows past each sequence's end (or before its start, with
    padding_side='left') with padding_value."""
    if isinstance(sequences, Tensor) or not hasattr(sequences, "__iter__"):
        raise TypeError("pad_sequence: sequences must be a list of Tensors, not %s"
                        % type(sequences).__name__)
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    for seq in sequences:
        if not isinstance(seq, Tensor):
            raise TypeError("pad_sequence: sequences must be Tensors, not %s" % type(seq).__name__)
        if seq.ndim == 0 or tuple(seq.shape[1:]) != tuple(sequences[0].shape[1:]):
            raise ShapeError("pad_sequence: sequences must be (L, *) with the same trailing dims, got "
                             "%s and %s" % (tuple(sequences[0].shape), tuple(seq.shape)))
    value = _scalar(padding_value)
    if value is None:
        raise TypeError("pad_sequence: padding_value must be a number")
    if padding_side not in ("left", "right"):
        raise ValueError("pad_sequence: padding_side must be 'left' or 'right', not %r"
                         % (padding_side,))
    longest = max(seq.shape[0] for seq in sequences)
    padded = []
    for seq in sequences:
        missing = longest - seq.shape[0]
        if missing:
            fill = full((missing,) + tuple(seq.shape[1:]), value)
            seq = cat([seq, fill] if padding_side == "right" else [fill, seq], 0)
        padded.append(seq)
    return stack(padded, 0 if batch_first else 1)
