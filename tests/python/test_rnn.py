"""Recurrent layers against the CPU with the CPU fallback disabled (so every op they
dispatch is native): nn.LSTM/GRU/RNN (tanh, relu) with 1-2 layers, bidirectional,
batch_first, proj_size, packed sequences and dropout between layers, forward outputs and
the gradients of the input, every weight and bias, h0 and c0; LSTMCell/GRUCell/RNNCell;
the fused cell ops directly (against the same math written out on the CPU, which has no
kernel for them) with non-contiguous inputs, no biases, an empty batch and half dtypes;
their errors; and a 20-step nn.LSTM training loop that tracks the CPU's losses."""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from conftest import DEVICE, assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")

OUT_TOL = dict(rtol=1e-4, atol=1e-5)
GRAD_TOL = dict(rtol=1e-4, atol=2e-5)
HALF_TOL = {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def compare_module(module, x, hidden=None, seed=1, run=None):
    """Runs `module` on x (and the initial state `hidden`) on the CPU and on a webgpu copy;
    compares every output, then backpropagates one random weighting of all outputs and
    compares the gradients of x, the state and every parameter."""
    run = run or (lambda m, inp, h: m(inp, h) if h is not None else m(inp))
    module.zero_grad(set_to_none=True)
    dmod = copy.deepcopy(module).to(DEVICE)

    def prep(t, device):
        if t is None:
            return None
        if isinstance(t, tuple):
            return tuple(prep(a, device) for a in t)
        return t.detach().clone().to(device).requires_grad_(True)

    cx, dx = prep(x, "cpu"), prep(x, DEVICE)
    ch, dh = prep(hidden, "cpu"), prep(hidden, DEVICE)
    cout, dout = run(module, cx, ch), run(dmod, dx, dh)
    couts, douts = flatten(cout), flatten(dout)
    assert len(couts) == len(douts)
    loss_c, loss_d = 0, 0
    for i, (c, d) in enumerate(zip(couts, douts)):
        assert_same(d.detach(), c.detach(), **OUT_TOL)
        w = rand(*c.shape, seed=seed + i)
        loss_c = loss_c + (c * w).sum()
        loss_d = loss_d + (d * w.to(DEVICE)).sum()
    loss_c.backward()
    loss_d.backward()
    for c, d in zip(flatten(cx) + flatten(ch), flatten(dx) + flatten(dh)):
        assert_same(d.grad, c.grad, **GRAD_TOL)
    for (name, cp), (_, dp) in zip(module.named_parameters(), dmod.named_parameters()):
        assert dp.grad is not None, name
        assert_same(dp.grad, cp.grad, **GRAD_TOL)
    return dout


def flatten(x):
    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, nn.utils.rnn.PackedSequence):
        return [x.data]
    return [t for item in x for t in flatten(item)]


def state(mode, layers, dirs, batch, hidden, proj=0, seed=7):
    h = rand(layers * dirs, batch, proj or hidden, seed=seed)
    if mode == "LSTM":
        return (h, rand(layers * dirs, batch, hidden, seed=seed + 1))
    return h


MODES = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]


def make_rnn(mode, *args, **kwargs):
    torch.manual_seed(0)
    if mode.startswith("RNN"):
        return nn.RNN(*args, nonlinearity=mode[4:].lower(), **kwargs)
    return getattr(nn, mode)(*args, **kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn_layers(mode, layers, bidirectional, batch_first):
    m = make_rnn(mode, 4, 6, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    x = rand(3, 5, 4) if batch_first else rand(5, 3, 4)
    compare_module(m, x, state(mode, layers, 2 if bidirectional else 1, 3, 6))


@pytest.mark.parametrize("mode", MODES)
def test_rnn_defaults_no_bias_unbatched(mode):
    # Zero initial state (none given), no biases, then an unbatched sequence.
    compare_module(make_rnn(mode, 4, 5, num_layers=2, bias=False), rand(6, 2, 4))
    h = rand(1, 5, seed=8)
    compare_module(make_rnn(mode, 4, 5), rand(6, 4), (h, rand(1, 5, seed=9)) if mode == "LSTM" else h)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_proj_size(layers, bidirectional):
    m = make_rnn("LSTM", 4, 7, num_layers=layers, bidirectional=bidirectional, proj_size=3,
                 batch_first=True)
    dirs = 2 if bidirectional else 1
    compare_module(m, rand(2, 5, 4), state("LSTM", layers, dirs, 2, 7, proj=3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_sequences(mode, enforce_sorted, batch_first):
    lengths = torch.tensor([6, 4, 4, 1]) if enforce_sorted else torch.tensor([3, 6, 1, 4])
    m = make_rnn(mode, 3, 5, num_layers=2, bidirectional=True, batch_first=batch_first)

    def run(mod, x, h):
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first,
                                      enforce_sorted=enforce_sorted)
        out, hn = mod(packed, h)
        padded, out_lengths = pad_packed_sequence(out, batch_first=batch_first,
                                                  padding_value=-2.0, total_length=7)
        assert out_lengths.tolist() == lengths.tolist()
        return padded, hn

    x = rand(4, 7, 3) if batch_first else rand(7, 4, 3)
    compare_module(m, x, state(mode, 2, 2, 4, 5), run=run)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_dropout_between_layers(mode):
    # p = 1 drops the whole first layer's output on both devices: deterministic, and the
    # dropout between layers runs natively in training mode.
    m = make_rnn(mode, 4, 5, num_layers=2, dropout=1.0)
    compare_module(m.train(), rand(5, 2, 4), state(mode, 2, 1, 2, 5))
    compare_module(m.eval(), rand(5, 2, 4), state(mode, 2, 1, 2, 5))


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell", "RNNCell_tanh", "RNNCell_relu"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells(cell, bias):
    torch.manual_seed(0)
    if cell.startswith("RNNCell"):
        m = nn.RNNCell(4, 6, bias=bias, nonlinearity=cell.split("_")[1])
    else:
        m = getattr(nn, cell)(4, 6, bias=bias)
    h = rand(3, 6, seed=3)
    hidden = (h, rand(3, 6, seed=4)) if cell == "LSTMCell" else h
    compare_module(m, rand(3, 4), hidden)
    compare_module(m, rand(3, 4))            # zero state
    compare_module(m, rand(4), None)          # unbatched


# ---- the fused cell ops directly ---------------------------------------------------------

def lstm_reference(ig, hg, cx, bi, bh):
    gates = (ig + bi) + (hg + bh) if bi is not None else ig + hg
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def gru_reference(ig, hg, hx, bi, bh):
    if bi is not None:
        ig, hg = ig + bi, hg + bh
    ir, iz, in_ = ig.chunk(3, 1)
    hr, hz, hn = hg.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n), torch.cat([r, z, n, hn, hx], 1)


def device_inputs(ins, layout):
    """webgpu copies of the cell inputs; "strided": the gate rows and the state as
    non-contiguous views (every other column of a wider buffer, a transposed copy)."""
    out = to_dev(ins)
    if layout == "strided":
        def every_other_column(t):
            wide = torch.zeros(t.shape[0], 2 * t.shape[1], device=DEVICE)
            wide[:, ::2] = t
            return wide[:, ::2]
        out[0] = every_other_column(out[0])
        out[1] = out[1].t().contiguous().t()
        out[2] = every_other_column(out[2])
        assert not any(t.is_contiguous() for t in out[:3])
    return out


def cell_inputs(gates, batch, hidden, bias, seed=0):
    ig, hg = rand(batch, gates * hidden, seed=seed), rand(batch, gates * hidden, seed=seed + 1)
    state = rand(batch, hidden, seed=seed + 2)
    bi = rand(gates * hidden, seed=seed + 3) if bias else None
    bh = rand(gates * hidden, seed=seed + 4) if bias else None
    return ig, hg, state, bi, bh


def to_dev(ts, dtype=None):
    out = []
    for t in ts:
        if t is None:
            out.append(None)
        else:
            t = t.to(dtype) if dtype is not None else t
            out.append(t.to(DEVICE))
    return out


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "empty"])
def test_fused_lstm_cell(bias, layout):
    batch = 0 if layout == "empty" else 3
    ins = cell_inputs(4, batch, 5, bias)
    ig, hg, cx, bi, bh = ins
    dins = device_inputs(ins, layout)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(*dins)
    ehy, ecy, ews = lstm_reference(*ins)
    assert_same(hy, ehy, **OUT_TOL)
    assert_same(cy, ecy, **OUT_TOL)
    assert_same(ws, ews, **OUT_TOL)

    # Backward: the gradients of the gates and cx that autograd gives for the same math;
    # no output gradient at all gives no gradients (as CUDA).
    nothing = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(None, None, dins[2], cy, ws, bias)
    assert nothing == (None, None, None)
    ghy, gcy = rand(batch, 5, seed=10), rand(batch, 5, seed=11)
    for give_hy, give_cy in [(True, True), (True, False), (False, True)]:
        ig_r = ig.clone().requires_grad_(True)
        cx_r = cx.clone().requires_grad_(True)
        rhy, rcy, _ = lstm_reference(ig_r, hg, cx_r, bi, bh)
        loss = (rhy * ghy).sum() * give_hy + (rcy * gcy).sum() * give_cy
        loss.backward()
        res = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
            ghy.to(DEVICE) if give_hy else None, gcy.to(DEVICE) if give_cy else None,
            dins[2], cy, ws, bias)
        assert_same(res[0], ig_r.grad, **GRAD_TOL)
        assert_same(res[1], cx_r.grad, **GRAD_TOL)
        if bias:
            assert_same(res[2], ig_r.grad.sum(0), **GRAD_TOL)
        else:
            assert res[2] is None
        # The composite full backward gives the gate gradient twice (both matmuls); it
        # runs where autograd calls it, with gradients off.
        with torch.no_grad():
            full = torch.ops.aten._thnn_fused_lstm_cell_backward(
                ghy.to(DEVICE) if give_hy else None, gcy.to(DEVICE) if give_cy else None,
                dins[2], cy, ws, bias)
        assert_same(full[0], ig_r.grad, **GRAD_TOL)
        assert_same(full[1], ig_r.grad, **GRAD_TOL)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "empty"])
def test_fused_gru_cell(bias, layout):
    batch = 0 if layout == "empty" else 3
    ins = list(cell_inputs(3, batch, 5, bias, seed=20))
    dins = device_inputs(ins, layout)
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(*dins)
    ehy, ews = gru_reference(*ins)
    assert_same(hy, ehy, **OUT_TOL)
    assert_same(ws, ews, **OUT_TOL)

    ghy = rand(batch, 5, seed=30)
    reqs = [t.clone().requires_grad_(True) if t is not None else None for t in ins]
    rhy, _ = gru_reference(*reqs)
    (rhy * ghy).sum().backward()
    gi, gh, ghx, gbi, gbh = torch.ops.aten._thnn_fused_gru_cell_backward(ghy.to(DEVICE), ws, bias)
    assert_same(gi, reqs[0].grad, **GRAD_TOL)
    assert_same(gh, reqs[1].grad, **GRAD_TOL)
    assert_same(ghx, reqs[2].grad, **GRAD_TOL)
    if bias:
        assert_same(gbi, reqs[3].grad, **GRAD_TOL)
        assert_same(gbh, reqs[4].grad, **GRAD_TOL)
    else:
        assert gbi is None and gbh is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_cells_half(dtype):
    ins = cell_inputs(4, 3, 5, True, seed=40)
    rounded = [t.to(dtype).float() for t in ins]
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(*to_dev(ins, dtype))
    for got, want in zip((hy, cy, ws), lstm_reference(*rounded)):
        assert got.dtype == dtype
        assert_same(got, want.to(dtype), **HALF_TOL[dtype])
    ghy = rand(3, 5, seed=41).to(dtype)
    gates, gcx, gb = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
        ghy.to(DEVICE), None, to_dev([ins[2]], dtype)[0], cy, ws, True)
    ig_r = rounded[0].clone().requires_grad_(True)
    cx_r = rounded[2].clone().requires_grad_(True)
    (lstm_reference(ig_r, rounded[1], cx_r, rounded[3], rounded[4])[0] * ghy.float()).sum().backward()
    assert_same(gates, ig_r.grad.to(dtype), **HALF_TOL[dtype])
    assert_same(gcx, cx_r.grad.to(dtype), **HALF_TOL[dtype])

    gins = cell_inputs(3, 3, 5, True, seed=50)
    grounded = [t.to(dtype).float() for t in gins]
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(*to_dev(gins, dtype))
    for got, want in zip((hy, ws), gru_reference(*grounded)):
        assert_same(got, want.to(dtype), **HALF_TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_lstm_layer_half(dtype):
    # The whole layer in a half dtype against the CPU's float32 layer on the same values.
    m = make_rnn("LSTM", 4, 6, num_layers=2)
    x = rand(5, 3, 4).to(dtype)
    want, _ = m(x.float())
    got, _ = copy.deepcopy(m).to(DEVICE, dtype)(x.to(DEVICE))
    assert got.dtype == dtype
    assert_same(got, want.detach().to(dtype), rtol=3e-2, atol=3e-2)


def test_fused_cell_errors():
    ig, hg, cx, bi, bh = to_dev(cell_inputs(4, 3, 5, True))
    cases = [
        lambda: torch.ops.aten._thnn_fused_lstm_cell(ig, hg[:, :-4], cx),
        lambda: torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx[:, :-1]),
        lambda: torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx, bi, None),
        lambda: torch.ops.aten._thnn_fused_lstm_cell(ig, hg, cx, bi[:-1], bh),
        lambda: torch.ops.aten._thnn_fused_lstm_cell(ig[:, :-1], hg[:, :-1], cx),
        lambda: torch.ops.aten._thnn_fused_lstm_cell(ig, hg.half(), cx),
        lambda: torch.ops.aten._thnn_fused_gru_cell(ig[:, :15], hg[:, :15], cx[:, :4]),
        lambda: torch.ops.aten._thnn_fused_gru_cell_backward(cx, ig, False),
    ]
    for case in cases:
        with pytest.raises(RuntimeError):
            case()
    with pytest.raises(NotImplementedError, match="Int"):
        torch.ops.aten._thnn_fused_lstm_cell(ig.int(), hg.int(), cx.int())


def test_lstm_training_tracks_cpu():
    """20 SGD steps of a small LSTM regressor, natively: the losses track the CPU's."""
    torch.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 8, num_layers=2, batch_first=True)
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    cpu_model = Model()
    dev_model = copy.deepcopy(cpu_model).to(DEVICE)
    x, y = rand(4, 6, 3, seed=1), rand(4, 1, seed=2)
    dx, dy = x.to(DEVICE), y.to(DEVICE)
    losses = []
    for model, inp, target in [(cpu_model, x, y), (dev_model, dx, dy)]:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        run = []
        for _ in range(20):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(inp), target)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    cpu_losses, dev_losses = losses
    assert cpu_losses[-1] < cpu_losses[0]  # the loop learns
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses),
                               rtol=1e-4, atol=1e-5)
    for cp, dp in zip(cpu_model.parameters(), dev_model.parameters()):
        assert_same(dp.detach(), cp.detach(), rtol=1e-4, atol=1e-5)
