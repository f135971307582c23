"""aicraft.nn.quantized - quantized layers, as PyTorch names them. Only the dynamic
ones so far (aicraft.nn.quantized.dynamic: int8 weights, inputs quantized at run
time); ac.quantization.quantize_dynamic makes them from float layers."""
from aicraft.nn.quantized import dynamic

__all__ = ["dynamic"]
