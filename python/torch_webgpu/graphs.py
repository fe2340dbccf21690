"""``torch.webgpu`` graphs: capture a region's dispatches once, replay them cheaply.

Shaped like ``torch.cuda.CUDAGraph`` / ``torch.cuda.graph``:

* Inside ``with torch.webgpu.graph(g):`` nothing runs on the device; every kernel
  launch, copy and upload is recorded (as on CUDA, outputs hold garbage until the first
  ``g.replay()``).
* ``g.replay()`` submits the recorded work again on the same memory: feed new data by
  ``copy_`` into the tensors the capture read (static inputs); read results from the
  tensors it produced (static outputs, overwritten by each replay).
* Memory allocated during capture comes from the graph's private pool (shared between
  graphs given the same ``pool=``, e.g. ``torch.webgpu.graph_pool_handle()``); eager
  code never reuses it while a graph lives.
* Random ops draw anew at each replay, as with CUDA graphs: a replay takes as many
  Philox blocks from the generator as the capture drew (the draws equal those eager code
  would make from the generator's state at the replay, and the generator advances as
  much). One generator per graph; seed it before capturing, not inside.
* Refused during capture, with a RuntimeError naming the op: host read-backs
  (``.item()``, ``.cpu()``, printing, ``nonzero``, ``multinomial``'s checks) and ops
  without a native kernel (CPU fallback).
"""
import gc

import torch

from . import _C

__all__ = ["WebGPUGraph", "graph", "graph_pool_handle", "make_graphed_callables",
           "is_current_stream_capturing"]


def graph_pool_handle():
    """An opaque id of a memory pool that several graphs may share (pass it as ``pool=``)."""
    return (_C._graph_pool_handle(),)


def _pool_id(pool) -> int:
    if pool is None:
        return 0
    if isinstance(pool, tuple) and len(pool) == 1 and isinstance(pool[0], int):
        return pool[0]
    raise TypeError(f"torch.webgpu graphs: pool must come from graph_pool_handle() or "
                    f"WebGPUGraph.pool(), got {pool!r}")


def is_current_stream_capturing() -> bool:
    """True while a graph captures (the device has one queue: capture is device-wide)."""
    return _C._is_capturing()


class WebGPUGraph:
    """A captured sequence of device work, as ``torch.cuda.CUDAGraph``."""

    def __init__(self):
        self._graph = _C._Graph()

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(f"unknown capture_error_mode {capture_error_mode!r}")
        self._graph.capture_begin(_pool_id(pool))

    def capture_end(self):
        self._graph.capture_end()

    def replay(self):
        """Runs the captured work again (asynchronously, in queue order)."""
        self._graph.replay()

    def reset(self):
        """Drops the capture and gives its private memory back."""
        self._graph.reset()

    def pool(self):
        """The id of this graph's memory pool, for ``graph(..., pool=g.pool())``."""
        return (self._graph.pool(),)

    def num_dispatches(self) -> int:
        """Kernel launches one replay submits."""
        return self._graph.num_dispatches()

    def num_random_dispatches(self) -> int:
        """Recorded dispatches that draw random numbers (redrawn at each replay)."""
        return self._graph.num_random_dispatches()

    def _abort(self):
        self._graph.capture_abort()


class graph:
    """Context manager capturing its body into ``webgpu_graph``, as ``torch.cuda.graph``.

    ``stream`` is accepted for signature compatibility: the device has one queue.
    """

    def __init__(self, webgpu_graph, pool=None, stream=None, capture_error_mode="global",
                 _collect=True):
        if not isinstance(webgpu_graph, WebGPUGraph):
            raise TypeError("torch.webgpu.graph expects a torch.webgpu.WebGPUGraph")
        self.webgpu_graph = webgpu_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.collect = _collect

    def __enter__(self):
        # Free what earlier code left to the collector and finish pending work first,
        # so the capture starts from a quiet device (as torch.cuda.graph does).
        torch.webgpu.synchronize()
        if self.collect:
            gc.collect()
            torch.webgpu.empty_cache()
        self.webgpu_graph.capture_begin(self.pool, self.capture_error_mode)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.webgpu_graph._abort()  # a failed capture leaves an empty graph
            return False
        self.webgpu_graph.capture_end()
        return False


class _GraphedFunction(torch.autograd.Function):
    """Replays a captured forward and backward in place of eager autograd."""

    @staticmethod
    def forward(ctx, runner, *inputs):
        ctx.runner = runner
        return runner.run_forward(inputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        return (None,) + ctx.runner.run_backward(grad_outputs)


class _GraphedRunner:
    """Static tensors and the two graphs of one graphed callable."""

    def __init__(self, fn, sample_args, params, num_warmup_iters, allow_unused_input, pool):
        self.params = params
        self.static_inputs = tuple(a.detach().requires_grad_(a.requires_grad) for a in sample_args)
        self.num_user_inputs = len(sample_args)
        differentiable = [t for t in self.static_inputs + params if t.requires_grad]

        def grads_of(outputs):
            outs = [o for o in outputs if o.requires_grad]
            return outs, torch.autograd.grad(
                outs, differentiable, grad_outputs=[torch.ones_like(o) for o in outs],
                allow_unused=allow_unused_input)

        # Warm up eagerly: first calls build pipelines and fill caches outside capture.
        for _ in range(num_warmup_iters):
            outputs = _as_tuple(fn(*self.static_inputs))
            if differentiable and any(o.requires_grad for o in outputs):
                grads_of(outputs)
            del outputs
        torch.webgpu.synchronize()

        self.fwd_graph = WebGPUGraph()
        with graph(self.fwd_graph, pool=pool):
            outputs = _as_tuple(fn(*self.static_inputs))
        self.static_outputs = outputs
        self.outputs_needing_grad = [i for i, o in enumerate(outputs) if o.requires_grad]

        self.bwd_graph = WebGPUGraph()
        self.static_grad_outputs = [torch.empty_like(outputs[i])
                                    for i in self.outputs_needing_grad]
        self.static_grads = ()
        if differentiable and self.outputs_needing_grad:
            with graph(self.bwd_graph, pool=self.fwd_graph.pool()):
                grads = torch.autograd.grad(
                    [outputs[i] for i in self.outputs_needing_grad], differentiable,
                    grad_outputs=self.static_grad_outputs, allow_unused=allow_unused_input)
            self.static_grads = grads
        # Where each differentiable tensor's gradient lands among (inputs..., params...).
        slot = {id(t): k for k, t in enumerate(differentiable)}
        self.grad_slots = [slot.get(id(t)) for t in self.static_inputs + params]

    def run_forward(self, inputs):
        for static, new in zip(self.static_inputs, inputs[:self.num_user_inputs]):
            if static.data_ptr() != new.data_ptr():
                static.copy_(new)
        self.fwd_graph.replay()
        return tuple(o.detach() for o in self.static_outputs)

    def run_backward(self, grad_outputs):
        for static, i in zip(self.static_grad_outputs, self.outputs_needing_grad):
            g = grad_outputs[i]
            if g is None:
                static.zero_()
            else:
                static.copy_(g)
        if self.static_grads:
            self.bwd_graph.replay()
        out = []
        for k in self.grad_slots:
            g = None if k is None else self.static_grads[k]
            out.append(None if g is None else g.detach().clone())
        return tuple(out)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def make_graphed_callables(callables, sample_args, num_warmup_iters=3,
                           allow_unused_input=False, pool=None):
    """Graphed versions of callables (modules or functions), as the torch.cuda function.

    Each one's forward and backward are captured once with ``sample_args`` (a tuple of
    tensors per callable); calls copy their inputs into the captured ones and replay.
    Modules keep their parameters; their gradients arrive through autograd as usual.
    """
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError("make_graphed_callables: one tuple of sample args per callable")
    if pool is None:
        pool = graph_pool_handle()
    results = []
    for fn, args in zip(callables, sample_args):
        args = _as_tuple(args)
        if not all(isinstance(a, torch.Tensor) and a.device.type == "webgpu" for a in args):
            raise TypeError("make_graphed_callables: sample args must be webgpu tensors")
        if isinstance(fn, torch.nn.Module):
            if fn._backward_hooks or fn._forward_hooks or fn._forward_pre_hooks:
                raise RuntimeError("make_graphed_callables: modules with hooks are not supported")
            params = tuple(fn.parameters())
        else:
            params = ()
        returns_tuple = isinstance(fn(*args), tuple)  # one eager call learns the shape
        runner = _GraphedRunner(fn, args, params, num_warmup_iters, allow_unused_input, pool)
        results.append(_make_graphed(fn, runner, params, returns_tuple))
    return results[0] if single else tuple(results)


def _make_graphed(fn, runner, params, returns_tuple):
    def graphed(*inputs):
        if len(inputs) != runner.num_user_inputs:
            raise TypeError(f"graphed callable takes {runner.num_user_inputs} tensors, "
                            f"got {len(inputs)}")
        outputs = _GraphedFunction.apply(runner, *inputs, *params)
        return outputs if returns_tuple else outputs[0]

    if not isinstance(fn, torch.nn.Module):
        return graphed
    eager_forward = fn.forward

    def forward(*inputs):
        # Graphed only in training mode, as torch.cuda's: eval calls run eagerly.
        return graphed(*inputs) if fn.training == runner_training else eager_forward(*inputs)

    runner_training = fn.training
    fn.forward = forward
    return fn
