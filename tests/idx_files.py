"""IDX files (Fashion-MNIST's format) written for tests, so no test needs the installed data set."""

from __future__ import annotations

import gzip
import struct

import numpy as np


def write_idx(path, arr, gz=False):
    """``arr`` as unsigned bytes in an IDX file at ``path`` (``path`` + ``.gz``, gzipped, if
    ``gz``)."""
    header = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    raw = header + arr.astype(np.uint8).tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)
