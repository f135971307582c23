"""SummaryWriter over tensorboard's EventFileWriter (see aicraft.utils.tensorboard)."""
import os
import socket
import time

import numpy as np
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

__all__ = ["SummaryWriter"]


def _number(value, what):
    if hasattr(value, "item"):
        value = value.item()
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError("%s: expected a number or a one-element tensor, got %s" % (what, type(value).__name__)) from None


def _array(values):
    if hasattr(values, "numpy"):
        values = values.numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


class SummaryWriter:
    """Writes TensorBoard event files into log_dir (default runs/<time>_<host><comment>)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            log_dir = os.path.join("runs", time.strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self._writer = EventFileWriter(log_dir, max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self.log_dir

    def _event(self, summary, global_step, walltime):
        event = Event(summary=summary, wall_time=time.time() if walltime is None else walltime)
        if global_step is not None:
            event.step = int(global_step)
        self._writer.add_event(event)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        value = _number(scalar_value, "add_scalar")
        self._event(Summary(value=[Summary.Value(tag=tag, simple_value=value)]), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        for tag, value in tag_scalar_dict.items():
            self.add_scalar("%s/%s" % (main_tag, tag), value, global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        data = _array(values)
        if data.size == 0:
            raise ValueError("add_histogram: the input has no element")
        edges = np.histogram_bin_edges(data, bins=30 if bins == "tensorflow" else bins)
        counts, edges = np.histogram(data, bins=edges)
        proto = HistogramProto(min=float(data.min()), max=float(data.max()), num=int(data.size),
                               sum=float(data.sum()), sum_squares=float((data * data).sum()),
                               bucket_limit=edges[1:].tolist(), bucket=counts.astype(np.float64).tolist())
        self._event(Summary(value=[Summary.Value(tag=tag, histo=proto)]), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
        tensor = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf-8")])
        tensor.tensor_shape.dim.add(size=1)
        self._event(Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=metadata, tensor=tensor)]),
                    global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        for tag, value in metric_dict.items():
            self.add_scalar(tag, value, global_step)
        self.add_text("hparams", ", ".join("%s=%s" % kv for kv in hparam_dict.items()), global_step)

    def _not_built(self, *args, **kwargs):
        raise NotImplementedError("SummaryWriter: this kind of summary is not supported by aicraft")

    add_image = add_images = add_figure = add_graph = add_embedding = add_audio = add_video = _not_built
    add_pr_curve = add_mesh = add_custom_scalars = _not_built

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
