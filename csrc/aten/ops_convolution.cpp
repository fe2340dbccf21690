// Convolutions for the webgpu device: ATen routes every convolution of an out-of-tree
// backend through `convolution_overrideable` / `convolution_backward_overrideable`.
//
// float32/float16/bfloat16 with 1 to 3 spatial dims (stride, padding, dilation, groups,
// transposed) run natively as im2col gathers plus the batched GEMM of kernels/matmul.h
// (on GPUs the GEMM's tiles gather the columns themselves: implicit GEMM), accumulating in
// float32. Everything else (float64, complex, integer dtypes, mixed
// dtypes) runs ATen's CPU convolution on CPU copies, so every convolution works.
//
// The three primitives below are written for a regular convolution X -> Y (y gathers
// x[o * stride - pad + k * dil]); a transposed convolution is the adjoint of one, so its
// forward is the data gradient of the regular one and vice versa.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <cstdlib>
#include <string>
#include <c10/core/SymIntArrayRef.h>
#include <torch/library.h>

#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/convolution.h"
#include "kernels/matmul.h"

namespace twgpu::aten {
namespace {

using at::IntArrayRef;
using at::Tensor;

struct ConvArgs {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

ConvArgs conv_args(c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                   c10::SymIntArrayRef dilation, bool transposed,
                   c10::SymIntArrayRef output_padding, const c10::SymInt& groups) {
  ConvArgs a;
  a.stride = C10_AS_INTARRAYREF_SLOW(stride).vec();
  a.padding = C10_AS_INTARRAYREF_SLOW(padding).vec();
  a.dilation = C10_AS_INTARRAYREF_SLOW(dilation).vec();
  a.output_padding = C10_AS_INTARRAYREF_SLOW(output_padding).vec();
  a.transposed = transposed;
  a.groups = groups.expect_int();
  return a;
}

bool conv_float(const Tensor& t) {
  auto s = t.scalar_type();
  return s == at::kFloat || s == at::kHalf || s == at::kBFloat16;
}

// True when the native path handles these operands and parameters.
bool native_conv(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvArgs& a,
                 const Tensor& extra = Tensor()) {
  const int64_t nd = input.dim() - 2;
  if (nd < 1 || nd > 3 || weight.dim() != input.dim()) return false;
  if (!conv_float(input) || weight.scalar_type() != input.scalar_type()) return false;
  if (bias.defined() && bias.scalar_type() != input.scalar_type()) return false;
  if (extra.defined() && extra.scalar_type() != input.scalar_type()) return false;
  if (a.groups < 1 || static_cast<int64_t>(a.stride.size()) != nd ||
      static_cast<int64_t>(a.padding.size()) != nd || static_cast<int64_t>(a.dilation.size()) != nd)
    return false;
  if (a.transposed && static_cast<int64_t>(a.output_padding.size()) != nd) return false;
  if (input.numel() == 0 || weight.numel() == 0) return false;
  for (const Tensor* t : {&input, &weight, &bias, &extra})
    if (t->defined() && t->device().type() != kDeviceType) return false;
  return true;
}

// The geometry of the regular convolution X -> Y behind (input, weight, args): for a
// regular convolution X is the input; for a transposed one X is the output.
ConvGeometry geometry(const Tensor& input, const Tensor& weight, const ConvArgs& a) {
  const int64_t nd = input.dim() - 2;
  ConvGeometry g;
  g.batch = static_cast<uint32_t>(input.size(0));
  g.groups = static_cast<uint32_t>(a.groups);
  // weight: (Cy, Cx / groups, k...) for both kinds (transposed: Cy = input channels).
  g.cx = static_cast<uint32_t>(weight.size(1));
  // Unused leading dims stay 1 so the used ones are the fastest-varying.
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t slot = 3 - nd + d;
    const int64_t k = weight.size(2 + d), s = a.stride[d], p = a.padding[d], dl = a.dilation[d];
    const int64_t in = input.size(2 + d);
    int64_t xs, ys;
    if (a.transposed) {
      ys = in;
      xs = (in - 1) * s - 2 * p + dl * (k - 1) + a.output_padding[d] + 1;
    } else {
      xs = in;
      ys = (in + 2 * p - dl * (k - 1) - 1) / s + 1;
    }
    g.xs[slot] = static_cast<uint32_t>(xs);
    g.ys[slot] = static_cast<uint32_t>(ys);
    g.ks[slot] = static_cast<uint32_t>(k);
    g.stride[slot] = static_cast<uint32_t>(s);
    g.pad[slot] = static_cast<uint32_t>(p);
    g.dil[slot] = static_cast<uint32_t>(dl);
  }
  return g;
}

std::vector<int64_t> spatial_sizes(const uint32_t* v, int64_t nd) {
  return std::vector<int64_t>(v + 3 - nd, v + 3);
}

bool is_pointwise(const ConvGeometry& g) { return conv_is_pointwise(g); }

MatOperand mat(const Tensor& t, uint64_t bo, uint64_t bi, uint64_t rows, uint64_t cols) {
  DeviceRef r = device_ref(t);
  MatOperand o;
  o.buffer = r.buffer;
  o.offset = r.offset;
  o.dtype = r.dtype;
  o.batch_outer = bo;
  o.batch_inner = bi;
  o.rows = rows;
  o.cols = cols;
  return o;
}

at::TensorOptions f32_like(const Tensor& t) { return t.options().dtype(at::kFloat); }

uint64_t images_per_pass(const ConvGeometry& g, uint64_t y_channels) {
  RuntimeLock lock;
  return conv_images_per_pass(lock.ctx(), g, y_channels);
}

std::vector<int64_t> nc_sizes(uint64_t n, uint64_t c, const uint32_t* spatial, int64_t nd) {
  std::vector<int64_t> v = {static_cast<int64_t>(n), static_cast<int64_t>(c)};
  for (int64_t s : spatial_sizes(spatial, nd)) v.push_back(s);
  return v;
}

bool columns_fit(const ConvGeometry& g) { return conv_columns_fit(Context::get(), g); }

std::vector<ConvGeometry> row_tiles(const ConvGeometry& g) { return conv_row_tiles(Context::get(), g); }

// A tile's output rows are contiguous within each channel plane of Y: `y` seen from the
// tile's first element there (so that a GEMM operand over the tile starts at it).
Tensor from_tile(const Tensor& y, const ConvGeometry& all, const ConvGeometry* tile) {
  if (!tile) return y;
  const uint64_t first = uint64_t(tile->y_first[0]) * all.ys[1] * all.ys[2] + uint64_t(tile->y_first[1]) * all.ys[2];
  return first ? y.view({-1}).narrow(0, static_cast<int64_t>(first), 1) : y;
}

// Where GEMMs run shared-memory tiles (GPUs): implicit GEMM (see kernels/convolution.h).
bool gather_columns(const ConvGeometry& g, uint64_t m, uint64_t n) {
  return conv_gather_columns(Context::get(), g, m, n);
}

// Makes d's B the columns of `g` gathered from x (contiguous images of the pass); returns
// the tap table, which must live until the GEMM is recorded.
Tensor gather_from(GemmDesc& d, const Tensor& x, const ConvGeometry& g) {
  Tensor taps = at::empty({static_cast<int64_t>(g.rows() * 4)}, x.options().dtype(at::kInt));
  {
    RuntimeLock lock;
    conv_gather_taps(lock.ctx(), g, device_ref(taps).buffer);
  }
  const uint64_t X = g.x_spatial();
  d.b = mat(x, uint64_t(g.groups) * g.cx * X, g.cx * X, 0, 0);
  d.conv = &g;
  d.conv_taps = device_ref(taps).buffer;
  return taps;
}

ConvOperand operand(const Tensor& t) {
  const DeviceRef r = device_ref(t);
  return ConvOperand{r.buffer, r.offset, r.dtype};
}

// The forward as the engine runs it (kernels/convolution.h): the plan's pieces, with its
// scratch allocated here.
Tensor conv_forward(const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                    const ConvGeometry& g, int64_t nd) {
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  Tensor y = at::empty(nc_sizes(g.batch, w.size(0), g.ys, nd), x.options());
  ConvForwardPlan plan;
  {
    RuntimeLock lock;
    plan = plan_conv_forward(lock.ctx(), g, static_cast<uint64_t>(w.size(0)));
  }
  Tensor col, taps;
  if (plan.col_elements) col = at::empty({static_cast<int64_t>(plan.col_elements)}, f32_like(x));
  if (plan.tap_words) taps = at::empty({static_cast<int64_t>(plan.tap_words)}, x.options().dtype(at::kInt));
  const ConvOperand b = bias.defined() ? operand(bias) : ConvOperand{};
  const uint64_t bias_stride = bias.defined() ? static_cast<uint64_t>(bias.stride(0)) : 0;
  RuntimeLock lock;
  record_conv_forward(lock.ctx(), plan, operand(x), operand(w), b, bias_stride, operand(y),
                      col.defined() ? device_ref(col).buffer : nullptr,
                      taps.defined() ? device_ref(taps).buffer : nullptr);
  return y;
}

// x (N, groups * cx, xs) = adjoint of conv_forward applied to gy (N, groups * cy, ys), for
// the images of one pass: one GEMM batched over (image, group) into columns, then one
// col2im over every image of the pass; `bias` (optional) is added before the one rounding.
// With `tile`: the tile's output rows only, their col2im added to x (float32, no bias).
void conv_backward_data_pass(const Tensor& gy, const Tensor& w, const Tensor& bias,
                             const Tensor& x, const ConvGeometry& g_all,
                             const ConvGeometry* tile = nullptr) {
  const ConvGeometry& g = tile ? *tile : g_all;
  const uint64_t N = g.batch, G = g.groups, R = g.rows(), L = g.y_spatial(), Ly = g_all.y_spatial();
  const uint64_t Cy = static_cast<uint64_t>(w.size(0)), cy = Cy / G, C = G * g.cx;
  GemmDesc d;
  d.batch_outer = N;
  d.batch_inner = G;
  d.m = R;
  d.n = L;
  d.k = cy;
  d.compute = Compute::F32;
  d.a = mat(w, 0, cy * R, 1, R);  // w^T per group
  d.b = mat(from_tile(gy, g_all, tile), Cy * Ly, cy * Ly, Ly, 1);
  if (is_pointwise(g) && !bias.defined() && !tile) {
    d.out = mat(x, C * L, g.cx * L, L, 1);
    RuntimeLock lock;
    gemm(lock.ctx(), d);
    return;
  }
  Tensor col = at::empty({static_cast<int64_t>(N * G * R * L)}, f32_like(gy));
  d.out = mat(col, G * R * L, R * L, L, 1);
  ColLayout lay{G * R * L, R * L, L, 1};
  MatOperand b;
  if (bias.defined()) b = mat(bias, 0, 0, static_cast<uint64_t>(bias.stride(0)), 0);
  DeviceRef xr = device_ref(x);
  RuntimeLock lock;
  gemm(lock.ctx(), d);
  conv_col2im(lock.ctx(), g, device_ref(col).buffer, lay, xr.buffer, xr.offset, xr.dtype, b,
              tile != nullptr);
}

// With unit strides the adjoint is itself a convolution: of gy with the weight flipped in
// space and transposed per group (cy <-> cx), padded by dil * (k - 1) - pad. Where GEMMs
// gather their columns (GPUs) that runs as the forward's implicit GEMM: no column buffer
// and no col2im. Float32 only (col2im rounds float16 sums as the CPU does).
bool adjoint_as_forward(const ConvGeometry& g, const Tensor& gy) {
  if (gy.scalar_type() != at::kFloat || is_pointwise(g) || !gather_columns(g, g.cx, g.x_spatial())) return false;
  for (int d = 0; d < 3; ++d) {
    const int64_t span = int64_t(g.dil[d]) * (g.ks[d] - 1);
    if (g.stride[d] != 1 || g.pad[d] > span || int64_t(g.xs[d]) != int64_t(g.ys[d]) + span - 2 * int64_t(g.pad[d]))
      return false;
  }
  return true;
}

Tensor conv_adjoint_as_forward(const Tensor& gy, const Tensor& w, const ConvGeometry& g, int64_t nd) {
  const int64_t G = g.groups, cy = w.size(0) / G, cx = g.cx;
  std::vector<int64_t> split = {G, cy, cx}, flip_dims, merged = {G * cx, cy};
  for (int64_t d = 0; d < nd; ++d) {
    split.push_back(w.size(2 + d));
    merged.push_back(w.size(2 + d));
    flip_dims.push_back(3 + d);
  }
  const Tensor wf = at::flip(w.reshape(split), flip_dims).transpose(1, 2).reshape(merged);
  ConvGeometry a = g;
  a.cx = static_cast<uint32_t>(cy);
  for (int d = 0; d < 3; ++d) {
    std::swap(a.xs[d], a.ys[d]);
    a.pad[d] = g.dil[d] * (g.ks[d] - 1) - g.pad[d];
  }
  return conv_forward(gy, wf, Tensor(), a, nd);
}

Tensor conv_backward_data(const Tensor& gy_in, const Tensor& w_in, const ConvGeometry& g,
                          int64_t nd, const Tensor& bias = Tensor()) {
  if (!bias.defined() && adjoint_as_forward(g, gy_in)) return conv_adjoint_as_forward(gy_in, w_in, g, nd);
  const Tensor gy = gy_in.contiguous(), w = w_in.contiguous();
  Tensor x = at::empty(nc_sizes(g.batch, uint64_t(g.groups) * g.cx, g.xs, nd), gy.options());
  const uint64_t step = images_per_pass(g, static_cast<uint64_t>(w.size(0)));
  for (uint64_t n0 = 0; n0 < g.batch; n0 += step) {
    ConvGeometry p = g;
    p.batch = static_cast<uint32_t>(std::min<uint64_t>(step, g.batch - n0));
    const Tensor gys = gy.narrow(0, n0, p.batch), xs = x.narrow(0, n0, p.batch);
    const std::vector<ConvGeometry> tiles = columns_fit(p) ? std::vector<ConvGeometry>() : row_tiles(p);
    if (tiles.empty()) {
      conv_backward_data_pass(gys, w, bias, xs, p);
      continue;
    }
    // The tiles' col2im add up in float32 (each input element gathers from several tiles).
    Tensor sum = at::zeros(xs.sizes(), f32_like(xs));
    for (const ConvGeometry& t : tiles) conv_backward_data_pass(gys, w, Tensor(), sum, p, &t);
    if (bias.defined()) {
      std::vector<int64_t> shape(sum.dim(), 1);
      shape[1] = bias.numel();
      sum.add_(bias.reshape(shape));
    }
    xs.copy_(sum);
  }
  return x;
}

// The weight gradient as a sum of pieces (passes of images, tiles of one image's output
// rows): each piece's GEMM adds the float32 total of the pieces before it (its C term) and
// writes the next total; the last writes gw itself, in its dtype, so one piece needs no
// float32 buffer at all.
class WeightGradSum {
 public:
  WeightGradSum(const Tensor& gw, bool one_piece) : gw_(gw) {
    if (!one_piece) {
      acc_ = at::empty(gw.sizes(), f32_like(gw));
      next_ = at::empty(gw.sizes(), f32_like(gw));
    }
  }
  // `layout`: the strides of d's output over gw's contiguous elements (no buffer).
  void add(GemmDesc d, const MatOperand& layout, bool last) {
    auto at_tensor = [&](const Tensor& t) {
      MatOperand o = layout;
      DeviceRef r = device_ref(t);
      o.buffer = r.buffer;
      o.offset = r.offset;
      o.dtype = r.dtype;
      return o;
    };
    d.out = at_tensor(last || !acc_.defined() ? gw_ : next_);
    if (started_) {
      d.c = at_tensor(acc_);
      d.beta = ScalarBits::from_f32(1.0f);
    }
    {
      RuntimeLock lock;
      gemm(lock.ctx(), d);
    }
    if (!last) {
      std::swap(acc_, next_);
      started_ = true;
    }
  }

 private:
  Tensor gw_, acc_, next_;
  bool started_ = false;
};

// Whether the weight gradient of a pass sums one GEMM per image (K = the image's outputs,
// into a float32 partial per image, then a sum over images) rather than one GEMM over the
// pass (K = images x outputs). The gradient (cy x R per group) has few tiles and a long K:
// one GEMM runs one workgroup per tile over every image (ResNet's 32x128x28x28 3x3: 144
// workgroups of 32x32, each 25088 deep), per image there are as many per tile as images;
// and a 1x1 convolution multiplies x itself, without columns. The partials cost cy x R
// floats per image against the image's R x L columns: taken when they are no larger
// (cy <= L), or when tiles are very few.
bool per_image_products(const ConvGeometry& g, uint64_t cy) {
  const uint64_t L = g.y_spatial(), R = g.rows();
  ConvGeometry one = g;
  one.batch = 1;
  if (g.batch < 2 || L < 64 || !columns_fit(one) ||
      2 * uint64_t(g.groups) * cy * R * 4 > window_budget(Context::get()))
    return false;
  const uint64_t tiles = uint64_t(g.groups) * ((cy + 31) / 32) * ((R + 31) / 32);
  return cy <= L || tiles < 128;
}

// gw (groups * cy, cx, k) = d conv_forward / d w for output gradient gy and input x.
Tensor conv_backward_weight(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_like,
                            const ConvGeometry& g) {
  const Tensor x = x_in.contiguous(), gy = gy_in.contiguous();
  const uint64_t G = g.groups, R = g.rows(), L = g.y_spatial(), C = G * g.cx;
  const uint64_t Cy = static_cast<uint64_t>(w_like.size(0)), cy = Cy / G;
  Tensor gw = at::empty(w_like.sizes(), x.options());
  const bool per_image = per_image_products(g, cy);
  uint64_t step = images_per_pass(g, Cy);
  if (per_image) step = std::min(step, std::max<uint64_t>(1, window_budget(Context::get()) / (Cy * R * 4)));
  ConvGeometry one = g;
  one.batch = 1;
  const bool tiled = !per_image && !columns_fit(one) && !row_tiles(one).empty();
  WeightGradSum sum(gw, step >= g.batch && !tiled);
  // The direct pieces' output: (group, cy, R) of gw.
  const MatOperand by_group = mat(gw, cy * R, 0, R, 1);
  for (uint64_t n0 = 0; n0 < g.batch; n0 += step) {
    ConvGeometry p = g;
    p.batch = static_cast<uint32_t>(std::min<uint64_t>(step, g.batch - n0));
    const uint64_t N = p.batch;
    const bool last_pass = n0 + N >= g.batch;
    const Tensor xs = x.narrow(0, n0, N), gys = gy.narrow(0, n0, N);
    GemmDesc d;
    d.compute = Compute::F32;
    Tensor col;
    auto im2col = [&](const ConvGeometry& geo, const ColLayout& lay) {
      col = at::empty({static_cast<int64_t>(uint64_t(geo.batch) * G * R * geo.y_spatial())}, f32_like(x));
      DeviceRef xr = device_ref(xs);
      RuntimeLock lock;
      conv_im2col(lock.ctx(), geo, xr.buffer, xr.offset, xr.dtype, device_ref(col).buffer, lay);
    };
    if (per_image) {
      // partial[n, g] = gy[n, g] (cy x L) @ cols[n, g]^T (L x R), then the sum over n.
      d.batch_outer = N;
      d.batch_inner = G;
      d.m = cy;
      d.n = R;
      d.k = L;
      d.a = mat(gys, Cy * L, cy * L, L, 1);
      if (is_pointwise(p)) {
        d.b = mat(xs, C * L, g.cx * L, 1, L);
      } else if (gather_columns(p, cy, R)) {
        col = gather_from(d, xs, p);
        d.conv_positions_along_k = true;
      } else {
        im2col(p, ColLayout{G * R * L, R * L, L, 1});
        d.b = mat(col, G * R * L, R * L, 1, L);
      }
      Tensor partial = at::empty({static_cast<int64_t>(N * Cy * R)}, f32_like(x));
      d.out = mat(partial, Cy * R, cy * R, R, 1);
      {
        RuntimeLock lock;
        gemm(lock.ctx(), d);
      }
      // The sum over images: ones (1 x N) @ partial (N x Cy*R).
      const Tensor ones = at::ones({1}, f32_like(x));
      GemmDesc s;
      s.m = 1;
      s.n = Cy * R;
      s.k = N;
      s.compute = Compute::F32;
      s.a = mat(ones, 0, 0, 0, 0);
      s.b = mat(partial, 0, 0, Cy * R, 1);
      sum.add(s, mat(gw, 0, 0, 0, 1), last_pass);
      continue;
    }
    if (N == 1 && !columns_fit(p)) {
      // One image, tiles of its output rows: each tile's gy rows against its columns.
      const std::vector<ConvGeometry> tiles = row_tiles(p);
      for (size_t i = 0; i < tiles.size(); ++i) {
        const ConvGeometry& t = tiles[i];
        const uint64_t Lt = t.y_spatial();
        im2col(t, ColLayout{G * R * Lt, R * Lt, Lt, 1});
        GemmDesc e = d;
        e.batch_outer = G;
        e.m = cy;
        e.n = R;
        e.k = Lt;
        e.a = mat(from_tile(gys, p, &t), cy * L, 0, L, 1);
        e.b = mat(col, R * Lt, 0, 1, Lt);
        sum.add(e, by_group, last_pass && i + 1 == tiles.size());
      }
      if (!tiles.empty()) continue;
    }
    // One GEMM over the pass: gy as (groups, cy, N, L) and columns as (groups, R, N, L),
    // so that K = (n, l) is one stride-1 index.
    const Tensor gyp = N == 1 ? gys
                              : gys.reshape({static_cast<int64_t>(N), static_cast<int64_t>(Cy),
                                             static_cast<int64_t>(L)})
                                    .permute({1, 0, 2})
                                    .contiguous();
    im2col(p, ColLayout{L, R * N * L, N * L, 1});
    d.batch_outer = G;
    d.m = cy;
    d.n = R;
    d.k = N * L;
    d.a = mat(gyp, cy * N * L, 0, N * L, 1);
    d.b = mat(col, R * N * L, 0, 1, N * L);
    sum.add(d, by_group, last_pass);
  }
  return gw;
}

// Sum over every dim but 1 (the bias gradient), as a GEMM against a broadcast one.
Tensor channel_sum(const Tensor& t) {
  const int64_t C = t.size(1), N = t.size(0), L = t.numel() / std::max<int64_t>(C * N, 1);
  Tensor tp = t.reshape({N, C, L}).permute({1, 0, 2}).contiguous();
  Tensor one = at::ones({1}, t.options());
  Tensor out = at::empty({C}, t.options());
  GemmDesc d;
  d.m = static_cast<uint64_t>(C);
  d.n = 1;
  d.k = static_cast<uint64_t>(N * L);
  d.compute = Compute::F32;
  d.a = mat(tp, 0, 0, static_cast<uint64_t>(N * L), 1);
  d.b = mat(one, 0, 0, 0, 0);
  d.out = mat(out, 0, 0, 1, 0);
  RuntimeLock lock;
  gemm(lock.ctx(), d);
  return out;
}

// ---- CPU path ---------------------------------------------------------------------------

Tensor back(const Tensor& t, const c10::Device& device) { return t.defined() ? t.to(device) : t; }

Tensor convolution_on_cpu(const Tensor& input, const Tensor& weight, const Tensor& bias,
                          const ConvArgs& a) {
  std::optional<Tensor> b;
  if (bias.defined()) b = bias.cpu();
  Tensor out = at::convolution(input.cpu(), weight.cpu(), b, a.stride, a.padding, a.dilation,
                               a.transposed, a.output_padding, a.groups);
  return out.to(input.device());
}

std::tuple<Tensor, Tensor, Tensor> backward_on_cpu(const Tensor& grad_output, const Tensor& input,
                                                   const Tensor& weight, const ConvArgs& a,
                                                   std::array<bool, 3> mask) {
  const int64_t out_channels = a.transposed ? weight.size(1) * a.groups : weight.size(0);
  std::vector<int64_t> bias_sizes = {out_channels};
  auto r = at::convolution_backward(grad_output.cpu(), input.cpu(), weight.cpu(), bias_sizes,
                                    a.stride, a.padding, a.dilation, a.transposed,
                                    a.output_padding, a.groups, mask);
  const auto device = input.device();
  return {back(std::get<0>(r), device), back(std::get<1>(r), device),
          back(std::get<2>(r), device)};
}

// ---- registered kernels ---------------------------------------------------------------

Tensor convolution_overrideable(const Tensor& input, const Tensor& weight,
                                const std::optional<Tensor>& bias_opt, c10::SymIntArrayRef stride,
                                c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                                bool transposed, c10::SymIntArrayRef output_padding,
                                c10::SymInt groups) {
  const ConvArgs a = conv_args(stride, padding, dilation, transposed, output_padding, groups);
  const Tensor bias = bias_opt.has_value() ? *bias_opt : Tensor();
  if (!native_conv(input, weight, bias, a)) return convolution_on_cpu(input, weight, bias, a);
  const int64_t nd = input.dim() - 2;
  const ConvGeometry g = geometry(input, weight, a);
  TWGPU_TRY
  if (!a.transposed) return conv_forward(input, weight, bias, g, nd);
  // The CPU adds a bfloat16 bias before rounding the sum, float32/float16 ones after.
  const bool fuse_bias = bias.defined() && input.scalar_type() == at::kBFloat16;
  Tensor out = conv_backward_data(input, weight, g, nd, fuse_bias ? bias : Tensor());
  if (bias.defined() && !fuse_bias) {
    std::vector<int64_t> shape(out.dim(), 1);
    shape[1] = bias.numel();
    out.add_(bias.reshape(shape));
  }
  return out;
  TWGPU_CATCH
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward_overrideable(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  const ConvArgs a = conv_args(stride, padding, dilation, transposed, output_padding, groups);
  if (!native_conv(input, weight, Tensor(), a, grad_output) || grad_output.numel() == 0)
    return backward_on_cpu(grad_output, input, weight, a, output_mask);
  const int64_t nd = input.dim() - 2;
  const ConvGeometry g = geometry(input, weight, a);
  Tensor gi, gw, gb;
  TWGPU_TRY
  if (!a.transposed) {
    if (output_mask[0]) gi = conv_backward_data(grad_output, weight, g, nd);
    if (output_mask[1]) gw = conv_backward_weight(grad_output, input, weight, g);
  } else {
    // input plays Y, grad_output plays X of the regular convolution.
    if (output_mask[0]) gi = conv_forward(grad_output, weight, Tensor(), g, nd);
    if (output_mask[1]) gw = conv_backward_weight(input, grad_output, weight, g);
  }
  if (output_mask[2]) gb = channel_sum(grad_output);
  TWGPU_CATCH
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace twgpu::aten
