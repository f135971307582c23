"""aicraft.utils.tensorboard - torch.utils.tensorboard's SummaryWriter, when the
tensorboard package is installed (pip install tensorboard): it writes TensorBoard's
event files with tensorboard's own writer; aicraft Tensors and NumPy arrays are
accepted wherever torch takes a tensor. Without the package, importing this module
raises ImportError naming it.

Built: add_scalar, add_scalars, add_histogram, add_text, add_hparams (scalars only),
flush, close, and the context-manager protocol. Images, graphs, embeddings and the
rest raise NotImplementedError.
"""
try:
    from tensorboard.compat.proto import summary_pb2 as _summary_pb2   # noqa: F401
    from tensorboard.summary.writer.event_file_writer import EventFileWriter as _EventFileWriter
except ImportError as exc:   # the package, or a part of it, is missing
    raise ImportError("aicraft.utils.tensorboard needs the tensorboard package (pip install tensorboard): %s"
                      % exc) from None

from aicraft.utils.tensorboard.writer import SummaryWriter  # noqa: E402

__all__ = ["SummaryWriter"]
