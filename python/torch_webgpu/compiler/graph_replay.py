"""``torch.compile(mode="reduce-overhead")`` on webgpu: replay compiled graphs through
``torch.webgpu`` graphs, as Inductor's CUDA graph trees do on cuda.

Inductor turns ``reduce-overhead`` into ``config.triton.cudagraphs`` and then skips every
non-cuda graph ("non-cuda device"). We wrap ``CompiledFxGraph.post_compile`` (which runs
after a fresh compilation and after a cache hit alike): when the mode asks for cudagraphs
and the graph computes on webgpu only, its callable becomes a ``GraphReplayer``.

Per input signature (shapes, strides, dtypes, integer values, and the addresses of the
inputs used in place) a replayer runs the first call eagerly (warm-up: pipelines, caches),
captures the second into a ``WebGPUGraph`` and replays it from then on:

* inputs Inductor marks static (parameters, buffers, ``mark_static_address`` tensors) and
  inputs the graph mutates (HF StaticCache's key/value tensors, whose buffers never move;
  transformers does not always mark them static) are used in place, their addresses part
  of the signature; the others are copied into static input tensors before each replay.
  (Copying a mutated KV cache in and out of static copies cost four copies of every layer's
  cache per token.)
* a signature whose metadata was captured before at other addresses (HF generate makes a
  new StaticCache per call) takes that graph over, pointed at the new tensors
  (``rebind``: the buffers swapped, bind groups rebuilt) instead of a new capture, which
  would run the compiled graph once more; where the new tensors do not fit (another offset
  in their buffer, one tensor in two parts) it captures again.
  ``TORCH_WEBGPU_COMPILE_REBIND=0`` always captures.
* outputs are aliases of the static outputs: as with CUDA graph trees, the next replay
  overwrites them, and an alias handed out before it then raises on any read of its data
  ("... overwritten by a subsequent run"; clone what must outlive the next call). A
  training forward whose previous outputs still wait for their backward (two forwards,
  then their backwards) runs without replay instead, as CUDA's trees record a new graph
  there; ``torch.compiler.cudagraph_mark_step_begin()`` declares them dead.

Random ops (dropout in training, rand*) replay with fresh draws, as on cuda. A graph whose
capture is refused (host read-backs, ops without a native kernel) runs without replay from
then on, after a one-time warning; the call never fails.
Training graphs replay too: AOTAutograd's forward and backward are compiled graphs of
their own; the backward's non-tangent inputs (saved tensors, which are the forward
replay's static outputs, and parameters) are used in place, its tangents copied. Gradient
outputs are handed out as copies of the static tensors: autograd would copy them into
``.grad`` anyway (it takes a tensor over only when nothing else references it), and
``torch.autograd.grad`` must return gradients that the next backward does not overwrite.
"""
from __future__ import annotations

import functools
import operator
import os
import warnings
import weakref

import torch

from . import autotune
from .. import _C

_data_ptr = torch.Tensor.data_ptr

# How many captured graphs one compiled graph keeps (each holds its own memory pool);
# beyond that the oldest is dropped, as a new StaticCache per generate() call would
# otherwise pile up graphs that are never replayed again.
MAX_GRAPHS_PER_CALLABLE = 8
# Signatures seen once (warmed up, not captured yet) that one compiled graph remembers.
MAX_WARMED_UP_SIGNATURES = 256


def _rebinds() -> bool:
    """Whether graphs are pointed at new tensors (TORCH_WEBGPU_COMPILE_REBIND=0: never)."""
    return os.environ.get("TORCH_WEBGPU_COMPILE_REBIND", "1") != "0"


OVERWRITTEN = (
    "Error: accessing tensor output of a replayed webgpu graph (torch.compile "
    "mode='reduce-overhead') that has been overwritten by a subsequent run. To keep it, "
    "clone the tensor outside of torch.compile() before calling the compiled function again.")


class _PendingBackward:
    """Whether a training forward ran since the last backward (any compiled graph), as CUDA
    graph trees track it: the saved tensors of such a forward must not be overwritten by
    another replay of its graph before its backward runs."""

    forward_ran = False
    mark = 0  # torch.compiler.cudagraph_mark_step_begin()'s counter when it was set

    @classmethod
    def set(cls, value):
        from torch._inductor.cudagraph_trees import MarkStepBox

        cls.forward_ran, cls.mark = value, MarkStepBox.mark_step_counter

    @classmethod
    def pending(cls) -> bool:
        from torch._inductor.cudagraph_trees import MarkStepBox

        return cls.forward_ran and cls.mark == MarkStepBox.mark_step_counter


def _counters():
    from torch._dynamo.utils import counters

    return counters["webgpu"]


class _Layout:
    """Which inputs of a compiled graph are tensors used in place, tensors copied, or other
    values (symbolic sizes), found once: a signature then costs an address per tensor used
    in place (hundreds of parameters) instead of its shape and strides."""

    def __init__(self, inputs, static_idxs):
        tensors = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        self.in_place = tuple(i for i in tensors if i in static_idxs)
        self.copied = tuple(i for i in tensors if i not in static_idxs)
        self.values = tuple(i for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor))
        # A tuple of the tensors used in place, whatever their number.
        pick = operator.itemgetter(*self.in_place) if self.in_place else (lambda _: ())
        self._pick_in_place = pick if len(self.in_place) != 1 else (lambda xs: (pick(xs),))

    def signature(self, inputs):
        """What a captured graph depends on: (the metadata of the copied inputs and the
        other values, the addresses of the inputs used in place). A different tensor used
        in place needs a new capture; one whose metadata was seen before needs no warm-up
        (its pipelines exist). The metadata of tensors used in place is left out: Dynamo's
        guards fix it for this compiled graph (symbolic sizes arrive as values)."""
        meta = [(tuple(inputs[i].shape), inputs[i].stride(), inputs[i].dtype,
                 inputs[i].device.type) for i in self.copied]
        meta.extend((type(inputs[i]), inputs[i]) for i in self.values)
        # (itemgetter and map stay in C: hundreds of parameters per call of a decode step.)
        return tuple(meta), tuple(map(_data_ptr, self._pick_in_place(inputs)))

    def matches(self, inputs) -> bool:
        """Whether `inputs` has the layout this was found from (guards make it so; checked
        cheaply anyway, since a mismatch would replay with wrong buffers)."""
        return len(inputs) == len(self.in_place) + len(self.copied) + len(self.values) and all(
            isinstance(inputs[i], torch.Tensor) for i in self.copied)


class _Captured:
    """One capture: its graph, the static copies of the copied inputs, its outputs."""

    def __init__(self, graph, static_inputs, outputs, owned, copied=(), rebindable=True):
        self.graph = graph
        self.dispatches = graph.num_dispatches()
        self.static_inputs = static_inputs  # index -> static tensor, for copied inputs
        self.outputs = outputs
        # The outputs in graph memory (not views of tensors used in place), handed out as
        # aliases; weak references to the aliases of the last replay.
        self.owned = owned
        self.handed = []
        # The outputs in graph memory handed out as copies (gradients).
        self.copied = copied
        # False where an output is a view of a tensor used in place: pointed at other
        # tensors, the graph would still hand out views of the old ones.
        self.rebindable = rebindable

    def hand_out(self):
        """The outputs of a replay: the static tensors, aliased or copied where in graph
        memory."""
        outputs = list(self.outputs)
        for i in self.copied:
            outputs[i] = outputs[i].clone()
        alias, handed = _C._graph_output_alias, self.handed
        for i in self.owned:
            outputs[i] = out = alias(outputs[i])
            handed.append(weakref.ref(out))
        return outputs

    def saved_outputs_live(self) -> bool:
        """Whether an output of the last replay that autograd did not wrap (a tensor saved
        for backward) is still referenced."""
        return any(t is not None and not t.requires_grad for t in (r() for r in self.handed))

    def overwrite_handed(self):
        """Before a replay: the aliases it will overwrite raise from now on."""
        for ref in self.handed:
            out = ref()
            if out is not None:
                _C._invalidate_graph_output(out, OVERWRITTEN)
        self.handed.clear()


class GraphReplayer:
    """A compiled graph's boxed callable (``fn(list_of_inputs)``) that replays."""

    def __init__(self, fn, static_input_idxs, mutated_input_idxs, kind="inference"):
        self.fn = fn
        # Used in place: static inputs and the inputs the graph mutates.
        self.static_idxs = frozenset(static_input_idxs) | frozenset(mutated_input_idxs)
        self.warmed_up = set()
        self.graphs = {}  # signature -> _Captured
        self.eager_only = False
        self.layout = None
        self.kind = kind  # "inference", "forward" (training) or "backward"
        self.warned_pending = False

    def __call__(self, inputs):
        pending = self.kind == "forward" and _PendingBackward.pending()
        if self.kind != "inference":
            _PendingBackward.set(self.kind == "forward")
        if self.eager_only or torch.webgpu.is_current_stream_capturing():
            return self.fn(inputs)
        if self.layout is None or not self.layout.matches(inputs):
            self.layout = _Layout(inputs, self.static_idxs)
            self.graphs.clear()
        key = self.layout.signature(inputs)
        captured = self.graphs.get(key)
        if captured is None:
            meta = key[0]
            if meta not in self.warmed_up:
                if len(self.warmed_up) >= MAX_WARMED_UP_SIGNATURES:
                    self.warmed_up.clear()
                self.warmed_up.add(meta)
                return self.fn(inputs)
            captured = self._rebound(key) or self._capture(inputs)
            if captured is None:
                return self.fn(inputs)
            # The same metadata at new addresses is mostly a new KV cache (HF generate makes
            # one per call): the graphs of older ones hold their buffers, keep one of them.
            same = [k for k in self.graphs if k[0] == meta]
            for old in same[:-1]:
                del self.graphs[old]
            self.graphs[key] = captured
            while len(self.graphs) > MAX_GRAPHS_PER_CALLABLE:
                del self.graphs[next(iter(self.graphs))]
        if pending and captured.handed and captured.saved_outputs_live():
            return self._run_pending(inputs)
        for i, static in captured.static_inputs.items():
            static.copy_(inputs[i])
        # (After the copies: a state loop `h = f(h)` passes the last replay's output in.)
        captured.overwrite_handed()
        try:
            captured.graph.replay()
        except RuntimeError:
            # A tensor used in place was freed since the capture and its address came
            # back for a new tensor: the graph takes the new one, or captures again.
            del self.graphs[key]
            try:
                if _rebinds() and captured.graph._graph.rebind(list(zip(key[1], key[1]))):
                    self.graphs[key] = captured
                    captured.graph.replay()
                    return self._finish(captured, inputs)
            except RuntimeError:
                self.graphs.pop(key, None)
            captured = self._capture(inputs)
            if captured is None:
                return self.fn(inputs)
            self.graphs[key] = captured
            for i, static in captured.static_inputs.items():
                static.copy_(inputs[i])
            captured.graph.replay()
        return self._finish(captured, inputs)

    def _finish(self, captured, inputs):
        counters = _counters()
        counters["graph_replays"] += 1
        counters["graph_replayed_dispatches"] += captured.dispatches
        # Host time of replay() (encoding and submits) and of its submits alone, in us.
        all_us, submit_us = captured.graph._graph.last_replay_us()
        counters["graph_replay_host_us"] += all_us
        counters["graph_replay_submit_us"] += submit_us
        inputs.clear()  # boxed calling convention: the callee owns the list
        return captured.hand_out()

    def _run_pending(self, inputs):
        """A training forward whose last replay's saved tensors still wait for their
        backward: run without replay (new memory) rather than overwrite them."""
        _counters()["graph_pending_backward_runs"] += 1
        if not self.warned_pending:
            self.warned_pending = True
            warnings.warn(
                "torch.compile(mode='reduce-overhead') on webgpu: a compiled forward ran "
                "again before the backward of its previous call; it runs without graph "
                "replay while that backward is pending. Run backward first, or call "
                "torch.compiler.cudagraph_mark_step_begin() if the previous outputs are no "
                "longer needed.", stacklevel=3)
        return self.fn(inputs)

    def _rebound(self, key):
        """The graph captured for the same metadata at other addresses (HF generate's
        previous KV cache), pointed at this call's tensors used in place: no capture (which
        runs the compiled graph once more and builds every bind group). None where none
        fits."""
        if not _rebinds():
            return None
        meta, addresses = key
        for old in reversed(list(self.graphs)):
            if old[0] != meta:
                continue
            captured = self.graphs[old]
            if not captured.rebindable or not captured.graph._graph.rebind(list(zip(old[1], addresses))):
                return None
            del self.graphs[old]
            _counters()["graph_rebinds"] += 1
            return captured
        return None

    def _capture(self, inputs):
        from ..graphs import WebGPUGraph, graph

        static_inputs = {}
        run_inputs = list(inputs)
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and i not in self.static_idxs:
                static = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype,
                                             device=x.device)
                static.copy_(x)
                static_inputs[i] = static
                run_inputs[i] = static
        captured_graph = WebGPUGraph()
        try:
            # (No collection first, unlike torch.webgpu.graph: one costs ~0.5 s under a
            # compiled model's Python heap, and a capture comes with every generate call.)
            with graph(captured_graph, _collect=False):
                outputs = self.fn(run_inputs)
        except RuntimeError as error:
            self.eager_only = True
            _counters()["graph_fallbacks"] += 1
            warnings.warn(f"torch.compile(mode='reduce-overhead') on webgpu: this graph "
                          f"runs without graph replay, its capture was refused: {error}",
                          stacklevel=2)
            return None
        _counters()["graph_captures"] += 1
        storages = {inputs[i].untyped_storage().data_ptr() for i in self.layout.in_place}
        in_place = [isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() in storages
                    for o in outputs]
        in_graph = tuple(
            i for i, o in enumerate(outputs)
            if isinstance(o, torch.Tensor) and o.device.type == "webgpu" and not in_place[i])
        # Gradients are copied (see the module's docstring), other outputs aliased.
        owned, copied = ((), in_graph) if self.kind == "backward" else (in_graph, ())
        return _Captured(captured_graph, static_inputs, outputs, owned, copied,
                         not any(in_place))


def _wants_replay(compiled_graph, graph_kwargs) -> bool:
    from torch._inductor import config

    # A graph with CPU nodes would replay without its host work: it runs as compiled.
    devices = set(compiled_graph.device_types) - {"meta"}
    return (bool(config.triton.cudagraphs) and devices == {"webgpu"}
            and compiled_graph.current_callable is not None)


def install() -> None:
    """Wraps ``CompiledFxGraph.post_compile`` once (see the module's docstring)."""
    from torch._inductor.output_code import CompiledFxGraph

    original = CompiledFxGraph.post_compile
    if getattr(original, "webgpu", False):
        return

    @functools.wraps(original)
    def post_compile(self, example_inputs, constants, graph_kwargs):
        original(self, example_inputs, constants, graph_kwargs)
        if autotune.wants_autotune(self):  # max-autotune: GEMMs tuned per shape (autotune.py)
            self.current_callable = autotune.GemmAutotuned(self.current_callable)
        if _wants_replay(self, graph_kwargs):
            # fx_kwargs, not graph_kwargs: an AOTAutograd cache hit passes no is_inference.
            kind = ("backward" if self.fx_kwargs.get("is_backward") else
                    "inference" if self.fx_kwargs.get("is_inference", True) else "forward")
            self.current_callable = GraphReplayer(
                self.current_callable, self.fx_kwargs.get("static_input_idxs") or (),
                self.mutated_input_idxs, kind)

    post_compile.webgpu = True
    CompiledFxGraph.post_compile = post_compile

