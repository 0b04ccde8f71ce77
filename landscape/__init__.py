"""Landscape: weight-space symmetries and linear mode connectivity of transformers."""

from landscape.models import ModelConfig, forward, init_params

__all__ = ["ModelConfig", "forward", "init_params"]
__version__ = "0.1.0"
