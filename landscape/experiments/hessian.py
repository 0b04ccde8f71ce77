"""The Hessian's numerics: Hessian-vector products of a model's mean loss on a fixed batch, the
top eigenvalues (and eigenvectors) by Lanczos, and the trace by Hutchinson's estimator
(docs/design.md §1, *Curvature along a path*; the driver along a line is
:mod:`landscape.experiments.curvature`).

H = ∇²L is never formed; everything comes from Hessian-vector products Hv = ∇_θ(∇_θL · v)
(Pearlmutter 1994), by double backward through the reference forward, on the parameters' device;
the vectors handed to and from Lanczos are float64 on the CPU:

- the top-k eigenvalues (largest algebraic, so a saddle's negative curvature does not crowd out
  the sharpest directions): implicitly restarted Lanczos, ARPACK's, through
  ``scipy.sparse.linalg.eigsh`` on a ``LinearOperator`` whose matvec is Hv, started from a seeded
  Gaussian vector; with their eigenvectors on request (:func:`top_eigenpairs`, signed by a fixed
  convention; the Hessian directions of ``landscape surface``);
- the trace: Hutchinson's estimator tr H = E[zᵀHz] over Rademacher probes z (Hutchinson 1990),
  the mean of ``probes`` draws with its standard error s/√m;
- per block: a block's parameters' names (:func:`parameter_blocks`) restrict a product to the
  diagonal block H_bb, whose product H_bb·v_b is the gradient of ∇_bL·v_b with respect to that
  block alone.

The batch runs in chunks of rows (how many fit the memory budget is the caller's:
:func:`row_bytes` is one row's share); when the whole batch is one chunk, its gradient graph is
built once and kept for every product (a product then costs one backward pass instead of a
forward and two backward passes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from landscape.models import ModelConfig, Params, forward

__all__ = [
    "DTYPES",
    "GRAPH_ELEMENTS",
    "LANCZOS_RESTARTS",
    "LANCZOS_TOL",
    "LANCZOS_VECTORS",
    "OUTSIDE_BLOCKS",
    "HessianProducts",
    "Matvec",
    "hutchinson_trace",
    "parameter_blocks",
    "positions",
    "row_bytes",
    "top_eigenpairs",
    "top_eigenvalues",
]

DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Lanczos: at least this many basis vectors (ARPACK's ncv; 2k + 1 for more), at most this many
# restarts, and the relative residual at which a Ritz value counts as converged: float64 far
# below the 1e-6 the tests ask of the eigenvalue (its error is about the residual squared over
# the gap), float32 at what its products' rounding allows.
LANCZOS_VECTORS = 20
LANCZOS_RESTARTS = 50
LANCZOS_TOL = {"float32": 1e-5, "float64": 1e-10}
# Elements the gradient's graph keeps per position of a row and per unit of
# n_layers·(d_model + ffn_width + n_heads·positions) + n_out, with the double backward's
# temporaries:
# ≈ 16 measured on gpt-shakespeare-d128 (float32, about 40 MB a window of 128 characters),
# rounded up twofold.
GRAPH_ELEMENTS = 32
OUTSIDE_BLOCKS = "outside blocks"
Matvec = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------- Hessian-vector products


def positions(cfg: ModelConfig, inputs: torch.Tensor | None = None) -> int:
    """Positions one row carries through the forward: a token window's length (``inputs``
    [rows, positions]; default the model's context), the context for other attention inputs
    (patches and a class token), 1 for an MLP."""
    if not cfg.has_attn:
        return 1
    if inputs is not None and inputs.ndim == 2 and not inputs.is_floating_point():
        return int(inputs.shape[1])
    return cfg.n_ctx


def row_bytes(cfg: ModelConfig, length: int, itemsize: int) -> int:
    """Bytes of the gradient graph and double backward of one row of ``length`` positions
    (:data:`GRAPH_ELEMENTS`)."""
    width = cfg.n_layers * (cfg.d_model + cfg.ffn_width + cfg.n_heads * length) + cfg.n_out
    return GRAPH_ELEMENTS * itemsize * length * width


def parameter_blocks(names: Sequence[str]) -> dict[str, list[str]]:
    """The parameters of each transformer block (``blocks.{l}``, in layer order), then those
    outside every block (:data:`OUTSIDE_BLOCKS`), each list sorted."""
    blocks: dict[int, list[str]] = {}
    outside = []
    for name in sorted(names):
        head, _, rest = name.partition(".")
        layer, _, _ = rest.partition(".")
        if head == "blocks" and layer.isdigit():
            blocks.setdefault(int(layer), []).append(name)
        else:
            outside.append(name)
    out = {f"blocks.{layer}": blocks[layer] for layer in sorted(blocks)}
    if outside:
        out[OUTSIDE_BLOCKS] = outside
    return out


class HessianProducts:
    """Hessian-vector products of the mean loss of one model on a fixed batch.

    ``params`` are copied (their dtype is the products' dtype); the batch runs in chunks of
    ``chunk_rows`` rows, each contributing its summed loss over the batch's prediction count, so
    the products are those of the whole batch's mean loss. A batch of one chunk keeps its
    gradient graph for every product. ``loss`` and ``gradient_norm`` are those of the point;
    ``products`` counts the products made.
    """

    def __init__(self, cfg: ModelConfig, params: Params, inputs: torch.Tensor,
                 targets: torch.Tensor, chunk_rows: int) -> None:  # fmt: skip
        self.cfg = cfg
        self.names = sorted(params)
        self.params = {k: params[k].detach().clone().requires_grad_(True) for k in self.names}
        ref = self.params[self.names[0]]
        self.dtype, self.device = ref.dtype, ref.device
        self.inputs = inputs.to(self.device)
        if self.inputs.is_floating_point():
            self.inputs = self.inputs.to(self.dtype)
        self.targets = targets.to(self.device)
        self.count = targets.numel()
        n = len(targets)
        self.cuts = [slice(i, i + chunk_rows) for i in range(0, n, max(1, chunk_rows))]
        self.products = 0
        self._kept: tuple[torch.Tensor, ...] | None = None
        loss, grad = 0.0, None
        keep = len(self.cuts) == 1
        for cut in self.cuts:
            value, grads = self._gradient(cut, graph=keep)
            loss += float(value)
            if keep:
                self._kept = grads
            flat = torch.cat([g.detach().reshape(-1).to(torch.float64) for g in grads])
            grad = flat if grad is None else grad + flat
            del grads
        self.loss = loss
        self.gradient_norm = float(grad.norm())

    def _gradient(self, cut: slice, graph: bool = True
                  ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:  # fmt: skip
        """The chunk's share of the mean loss and its gradient (with the gradient's graph when
        ``graph``; a parameter the loss does not read has gradient 0)."""
        wanted = [self.params[k] for k in self.names]
        with torch.enable_grad():
            logits = forward(self.cfg, self.params, self.inputs[cut], fast=False)
            y = self.targets[cut].reshape(-1)
            loss = F.cross_entropy(logits.reshape(y.shape[0], -1), y, reduction="sum")
            loss = loss / self.count
            grads = torch.autograd.grad(loss, wanted, create_graph=graph, allow_unused=True)
        grads = tuple(torch.zeros_like(w) if g is None else g
                      for g, w in zip(grads, wanted, strict=True))  # fmt: skip
        return loss.detach(), grads

    def size(self, names: Sequence[str] | None = None) -> int:
        """Parameters in ``names`` (default: all)."""
        return sum(self.params[k].numel() for k in (names or self.names))

    def product(self, v: torch.Tensor, names: Sequence[str] | None = None) -> torch.Tensor:
        """H·v for a flat float64 ``v`` over the parameters ``names`` (default: all; a subset is
        the diagonal block of H on them), as a flat float64 vector on the CPU."""
        names = list(names or self.names)
        shapes = [self.params[k].shape for k in names]
        parts = torch.split(v.to(self.device, self.dtype), [math.prod(s) for s in shapes])
        vs = {k: p.reshape(s) for k, p, s in zip(names, parts, shapes, strict=True)}
        out = torch.zeros(v.numel(), dtype=torch.float64)
        wanted = [self.params[k] for k in names]
        for cut in self.cuts:
            grads = self._kept if self._kept is not None else self._gradient(cut)[1]
            g = dict(zip(self.names, grads, strict=True))
            with torch.enable_grad():
                dot = sum((g[k] * vs[k]).sum() for k in names if g[k].requires_grad)
                if not isinstance(dot, torch.Tensor):  # the gradient is constant on them
                    continue
                hv = torch.autograd.grad(dot, wanted, retain_graph=self._kept is not None,
                                         allow_unused=True)  # fmt: skip
            out += torch.cat([(h if h is not None else torch.zeros_like(w)).reshape(-1)
                              .to(torch.float64).cpu() for h, w in zip(hv, wanted,
                                                                      strict=True)])  # fmt: skip
        self.products += 1
        return out

    def matvec(self, names: Sequence[str] | None = None) -> Matvec:
        """:meth:`product` on NumPy vectors (what ARPACK calls)."""

        def mv(x: np.ndarray) -> np.ndarray:
            v = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64).reshape(-1))
            return self.product(v, names).numpy()

        return mv

    def flatten(self, vectors: Params) -> torch.Tensor:
        """``vectors`` (a tensor per parameter name, any dtype and device) as one flat float64
        vector on the CPU, in the order :meth:`product` takes (sorted names)."""
        return torch.cat([vectors[k].detach().to(torch.float64).reshape(-1).cpu()
                          for k in self.names])  # fmt: skip

    def unflatten(self, v: torch.Tensor | np.ndarray) -> Params:
        """A flat vector over every parameter (sorted names) as a tensor per name, shaped like
        the parameters, float64 on the CPU."""
        flat = torch.as_tensor(np.asarray(v, dtype=np.float64).reshape(-1))
        shapes = [self.params[k].shape for k in self.names]
        parts = torch.split(flat, [math.prod(s) for s in shapes])
        return {k: p.reshape(s).clone() for k, p, s in zip(self.names, parts, shapes,
                                                             strict=True)}  # fmt: skip


# ---------------------------------------------------------------- Lanczos and Hutchinson


def _lanczos(matvec: Matvec, n: int, k: int, seed: int, tol: float, vectors: bool
             ) -> tuple[Any, bool]:  # fmt: skip
    """ARPACK's ``eigsh(which="LA")`` on ``matvec`` (see :func:`top_eigenvalues`): its values, or
    (values, vectors) with ``vectors``, and whether all converged (else what did)."""
    op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    v0 = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    ncv = min(n, max(2 * k + 1, LANCZOS_VECTORS))
    try:
        out = eigsh(op, k=k, which="LA", v0=v0.numpy(), ncv=ncv, tol=tol,
                    maxiter=LANCZOS_RESTARTS, return_eigenvectors=vectors)  # fmt: skip
        return out, True
    except ArpackNoConvergence as e:
        return ((e.eigenvalues, e.eigenvectors) if vectors else e.eigenvalues), False


def top_eigenvalues(matvec: Matvec, n: int, k: int, *, seed: int = 0, tol: float = 1e-10
                    ) -> tuple[list[float], bool]:  # fmt: skip
    """The ``k`` largest (algebraic) eigenvalues of the symmetric n × n operator ``matvec``,
    largest first, and whether all converged: ARPACK's implicitly restarted Lanczos
    (``eigsh(which="LA")``) with max(2k + 1, :data:`LANCZOS_VECTORS`) basis vectors, started
    from a Gaussian vector seeded by ``seed``, to relative residual ``tol``. At most n − 1 values
    (ARPACK's limit). Not converged after :data:`LANCZOS_RESTARTS` restarts: the values that
    did, and False."""
    k = max(1, min(k, n - 1))
    values, converged = _lanczos(matvec, n, k, seed, tol, vectors=False)
    return sorted((float(x) for x in values), reverse=True), converged


def top_eigenpairs(matvec: Matvec, n: int, k: int, *, seed: int = 0, tol: float = 1e-10
                   ) -> tuple[list[float], np.ndarray, bool]:  # fmt: skip
    """The ``k`` largest (algebraic) eigenvalues of the symmetric n × n operator ``matvec``,
    largest first, their eigenvectors, and whether all converged: the Lanczos of
    :func:`top_eigenvalues` (same basis, start, tolerance and limits), asked for its Ritz vectors
    too.

    The eigenvectors are the columns of an n × (values) float64 array, in the order of the
    values, each of unit norm. An eigenvector's sign is arbitrary (v and −v are both, and
    ARPACK's choice depends on the start), so each is signed by a fixed convention: **its entry
    of largest magnitude is positive** (the first such entry, by index, where magnitudes tie
    exactly). A repeated eigenvalue has no unique eigenvectors; those returned then span its
    eigenspace. Not converged: the pairs that did, and False.
    """
    k = max(1, min(k, n - 1))
    (values, vectors), converged = _lanczos(matvec, n, k, seed, tol, vectors=True)
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    vectors = np.asarray(vectors, dtype=np.float64).reshape(n, len(values))
    order = np.argsort(-values, kind="stable")
    values, vectors = values[order], vectors[:, order].copy()
    for j in range(vectors.shape[1]):
        v = vectors[:, j]
        v /= np.linalg.norm(v)
        if v[np.argmax(np.abs(v))] < 0:
            v *= -1.0
    return [float(x) for x in values], vectors, converged


def hutchinson_trace(matvec: Matvec, n: int, probes: int, *, seed: int = 0
                     ) -> tuple[float, float]:  # fmt: skip
    """Hutchinson's estimate of tr H: the mean of zᵀHz over ``probes`` Rademacher vectors z
    (entries ±1, drawn by ``seed``), and its standard error s/√m (NaN for one probe)."""
    gen = torch.Generator().manual_seed(seed)
    samples = []
    for _ in range(probes):
        z = torch.randint(0, 2, (n,), generator=gen, dtype=torch.float64) * 2 - 1
        samples.append(float(z.numpy() @ matvec(z.numpy())))
    x = np.asarray(samples)
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan
    return float(x.mean()), se
