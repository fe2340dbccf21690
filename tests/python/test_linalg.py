"""Native dense linear algebra (float32): LU and its solves, inverse, determinants,
Cholesky, triangular solves, QR, SVD, eigh, least squares and the matrix exponential,
against PyTorch on the CPU."""
import pytest
import torch
import torch_webgpu

from conftest import DEVICE, cpu, dev

TOL = dict(rtol=1e-4, atol=1e-4)


def well_conditioned(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    return torch.randn(*shape, generator=g) + n * torch.eye(n) * 0.5


def spd(*shape, seed=0):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 3, 4, 6), (2, 6, 4), (1, 1), (0, 3, 3),
                                   (3, 0, 0)])
def test_lu_factor_matches_lapack(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    lu, piv, info = torch.linalg.lu_factor_ex(dev(a))
    lu_c, piv_c, info_c = torch.linalg.lu_factor_ex(a)
    torch.testing.assert_close(cpu(lu), lu_c, **TOL)
    assert torch.equal(cpu(piv), piv_c) and torch.equal(cpu(info), info_c)


def test_lu_factor_reports_zero_pivots_and_raises_when_asked():
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    _, _, info = torch.linalg.lu_factor_ex(dev(a))
    assert cpu(info).item() == torch.linalg.lu_factor_ex(a).info.item() == 2
    with pytest.raises(RuntimeError, match=r"U\[1,1\] is zero"):
        torch.linalg.lu_factor(dev(torch.zeros(3, 3)))


def test_lu_factor_non_contiguous_and_offset_input():
    base = torch.randn(6, 12, generator=torch.Generator().manual_seed(2))
    a = base[1:, 2::2]  # 5 x 5, strided, offset
    torch.testing.assert_close(cpu(torch.linalg.lu_factor(dev(base)[1:, 2::2]).LU),
                               torch.linalg.lu_factor(a).LU, **TOL)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve(left, adjoint):
    a = well_conditioned(2, 4, 4)
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    lu, piv = torch.linalg.lu_factor(a)
    got = torch.linalg.lu_solve(dev(lu), dev(piv), dev(b), left=left, adjoint=adjoint)
    torch.testing.assert_close(cpu(got), torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint), **TOL)


@pytest.mark.parametrize("a_shape,b_shape,left", [
    ((4, 4), (4, 2), True), ((3, 4, 4), (4,), True), ((3, 4, 4), (3, 4), True),
    ((2, 1, 5, 5), (3, 5, 2), True), ((4, 4), (2, 4), False), ((0, 4, 4), (0, 4, 1), True),
    ((4, 4), (4, 0), True)])
def test_solve_broadcasts_like_the_cpu(a_shape, b_shape, left):
    a = well_conditioned(*a_shape)
    b = torch.randn(*b_shape)
    torch.testing.assert_close(cpu(torch.linalg.solve(dev(a), dev(b), left=left)),
                               torch.linalg.solve(a, b, left=left), **TOL)


def test_inv_det_slogdet():
    a = well_conditioned(3, 5, 5)
    a[1] = -a[1]
    torch.testing.assert_close(cpu(torch.linalg.inv(dev(a))), torch.linalg.inv(a), **TOL)
    torch.testing.assert_close(cpu(torch.linalg.det(dev(a))), torch.linalg.det(a), rtol=1e-4, atol=1e-3)
    sign, logabs = torch.linalg.slogdet(dev(a))
    sign_c, logabs_c = torch.linalg.slogdet(a)
    torch.testing.assert_close(cpu(sign), sign_c)
    torch.testing.assert_close(cpu(logabs), logabs_c, **TOL)


def test_det_of_singular_and_empty_matrices():
    z = torch.zeros(2, 3, 3)
    torch.testing.assert_close(cpu(torch.linalg.det(dev(z))), torch.linalg.det(z))
    sign, logabs = torch.linalg.slogdet(dev(z))
    assert torch.equal(cpu(sign), torch.zeros(2)) and bool((cpu(logabs) == -float("inf")).all())
    torch.testing.assert_close(cpu(torch.linalg.det(dev(torch.ones(2, 0, 0)))), torch.ones(2))


def test_inv_of_singular_matrix_raises_and_device_keeps_working():
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(dev(torch.zeros(3, 3)))
    a = well_conditioned(3, 3)
    torch.testing.assert_close(cpu(torch.linalg.inv(dev(a))), torch.linalg.inv(a), **TOL)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (0, 2, 2)])
def test_cholesky(upper, shape):
    a = spd(*shape)
    torch.testing.assert_close(cpu(torch.linalg.cholesky(dev(a), upper=upper)),
                               torch.linalg.cholesky(a, upper=upper), **TOL)


def test_cholesky_of_indefinite_matrix():
    a = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    assert cpu(torch.linalg.cholesky_ex(dev(a)).info).item() == torch.linalg.cholesky_ex(a).info.item()
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(dev(a))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit):
    a = well_conditioned(2, 4, 4)
    a = a.triu() if upper else a.tril()
    b = torch.randn(2, 4, 3) if left else torch.randn(2, 3, 4)
    got = torch.linalg.solve_triangular(dev(a), dev(b), upper=upper, left=left, unitriangular=unit)
    want = torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)
    torch.testing.assert_close(cpu(got), want, **TOL)
    out = torch.empty(0, device=DEVICE)
    torch.linalg.solve_triangular(dev(a), dev(b), upper=upper, left=left, unitriangular=unit, out=out)
    torch.testing.assert_close(cpu(out), want, **TOL)


def test_solve_triangular_shape_error():
    with pytest.raises(RuntimeError, match="Incompatible shapes"):
        torch.linalg.solve_triangular(dev(torch.eye(3)), dev(torch.ones(4, 1)), upper=True)


def test_gradients_through_solve_inv_det():
    a = well_conditioned(4, 4)
    b = torch.randn(4, 2)
    grads = []
    for device in ("cpu", DEVICE):
        x = a.clone().to(device).requires_grad_()
        y = b.clone().to(device).requires_grad_()
        (torch.linalg.solve(x, y).sum() + torch.linalg.inv(x).sum() + torch.linalg.det(x)).backward()
        grads.append((cpu(x.grad), cpu(y.grad)))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-3, atol=1e-3)


def test_float64_goes_to_the_cpu():
    a = well_conditioned(3, 3).double()
    torch.testing.assert_close(cpu(torch.linalg.inv(dev(a))), torch.linalg.inv(a))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_legacy_solve_and_inverse(upper):
    a = spd(2, 4, 4)
    f = torch.linalg.cholesky(a, upper=upper)
    b = torch.randn(2, 4, 3)
    torch.testing.assert_close(cpu(torch.cholesky(dev(a), upper=upper)), torch.cholesky(a, upper=upper), **TOL)
    torch.testing.assert_close(cpu(torch.cholesky_solve(dev(b), dev(f), upper=upper)),
                               torch.cholesky_solve(b, f, upper=upper), **TOL)
    torch.testing.assert_close(cpu(torch.cholesky_inverse(dev(f[0]), upper=upper)),
                               torch.cholesky_inverse(f[0], upper=upper), **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 3, 5)])
def test_lu_and_lu_unpack(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    got = torch.linalg.lu(dev(a))
    want = torch.linalg.lu(a)
    for g, w in zip(got, want):
        torch.testing.assert_close(cpu(g), w, **TOL)
    lu, piv = torch.linalg.lu_factor(a)
    for g, w in zip(torch.lu_unpack(dev(lu), dev(piv)), torch.lu_unpack(lu, piv)):
        torch.testing.assert_close(cpu(g), w, **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16])
def test_cross(dtype):
    a = torch.randn(4, 3, 2).to(dtype)
    b = torch.randn(1, 3, 2).to(dtype)
    torch.testing.assert_close(cpu(torch.linalg.cross(dev(a), dev(b), dim=1)),
                               torch.linalg.cross(a, b, dim=1))
    with pytest.raises(RuntimeError):
        torch.linalg.cross(dev(torch.randn(4, 2)), dev(torch.randn(4, 2)))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 4), (0, 3, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_lapack(shape, mode):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(4))
    got = torch.linalg.qr(dev(a), mode=mode)
    want = torch.linalg.qr(a, mode=mode)
    for g, w in zip(got, want):
        torch.testing.assert_close(cpu(g), w, **TOL)


def test_geqrf_householder_product_ormqr():
    a = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(5))
    r, tau = torch.geqrf(dev(a))
    r_c, tau_c = torch.geqrf(a)
    torch.testing.assert_close(cpu(r), r_c, **TOL)
    torch.testing.assert_close(cpu(tau), tau_c, **TOL)
    torch.testing.assert_close(cpu(torch.linalg.householder_product(dev(r_c), dev(tau_c))),
                               torch.linalg.householder_product(r_c, tau_c), **TOL)
    for left in (True, False):
        for transpose in (True, False):
            c = torch.randn(2, 5, 4) if left else torch.randn(2, 4, 5)
            torch.testing.assert_close(
                cpu(torch.ormqr(dev(r_c), dev(tau_c), dev(c), left=left, transpose=transpose)),
                torch.ormqr(r_c, tau_c, c, left=left, transpose=transpose), **TOL)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 4), (1, 1), (0, 2, 2)])
def test_svd_values_and_factors(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(cpu(torch.linalg.svdvals(dev(a))), torch.linalg.svdvals(a), **TOL)
    u, s, vh = torch.linalg.svd(dev(a), full_matrices=False)
    # Singular vectors are unique up to sign: check the factorization and orthogonality.
    u, s, vh = cpu(u), cpu(s), cpu(vh)
    torch.testing.assert_close(u @ torch.diag_embed(s) @ vh, a, **TOL)
    k = min(shape[-2:])
    torch.testing.assert_close(u.mT @ u, torch.eye(k).expand(*shape[:-2], k, k), **TOL)
    torch.testing.assert_close(cpu(torch.linalg.pinv(dev(a))), torch.linalg.pinv(a), **TOL)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 2)])
def test_svd_full_matrices_of_rectangular(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(8))
    u, s, vh = (cpu(t) for t in torch.linalg.svd(dev(a), full_matrices=True))
    m, n = shape[-2:]
    assert u.shape[-2:] == (m, m) and vh.shape[-2:] == (n, n)
    torch.testing.assert_close(u.mT @ u, torch.eye(m).expand_as(u), **TOL)
    torch.testing.assert_close(vh @ vh.mT, torch.eye(n).expand_as(vh), **TOL)
    k = min(m, n)
    torch.testing.assert_close(u[..., :k] @ torch.diag_embed(s) @ vh[..., :k, :], a, **TOL)


@pytest.mark.parametrize("shape", [(3, 0), (0, 2), (2, 4, 0), (0, 3, 2)])
def test_svd_full_matrices_without_columns(shape):
    # k = 0 (or no matrices): the long factor is the identity of its size, as on the CPU.
    a = torch.randn(*shape)
    for t, e in zip(torch.linalg.svd(dev(a), full_matrices=True),
                    torch.linalg.svd(a, full_matrices=True)):
        torch.testing.assert_close(cpu(t), e)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    a = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(7))
    sym = a + a.mT
    w, v = torch.linalg.eigh(dev(a.tril() + a.tril(-1).mT if uplo == "L" else a), UPLO=uplo)
    ref = a.tril() + a.tril(-1).mT if uplo == "L" else a.triu() + a.triu(1).mT
    torch.testing.assert_close(cpu(w), torch.linalg.eigvalsh(ref), **TOL)
    w, v = cpu(w), cpu(v)
    torch.testing.assert_close(v @ torch.diag_embed(w) @ v.mT, ref, **TOL)
    torch.testing.assert_close(cpu(torch.linalg.eigvalsh(dev(sym))), torch.linalg.eigvalsh(sym), **TOL)


def test_large_matrices_are_right_on_every_adapter():
    # llvmpipe stops a loop after 65535 iterations: per-matrix kernels larger than that
    # compute on the CPU there (caps().max_loop_iterations); real GPUs run them natively.
    a = well_conditioned(64, 64, seed=9)
    torch.testing.assert_close(cpu(torch.linalg.inv(dev(a))), torch.linalg.inv(a), rtol=1e-3, atol=1e-3)
    s = torch.linalg.svdvals(dev(a[:40, :30]))
    torch.testing.assert_close(cpu(s), torch.linalg.svdvals(a[:40, :30]), rtol=1e-3, atol=1e-3)
    sym = spd(48, 48)
    torch.testing.assert_close(cpu(torch.linalg.eigvalsh(dev(sym))), torch.linalg.eigvalsh(sym),
                               rtol=1e-3, atol=1e-3)


# ---- least squares ---------------------------------------------------------------------

def lstsq_pair(a, b, **kw):
    return torch.linalg.lstsq(dev(a), dev(b), **kw), torch.linalg.lstsq(a, b, **kw)


def assert_lstsq_close(got, ref, tol=TOL):
    for name in ("solution", "residuals", "rank", "singular_values"):
        g, r = cpu(getattr(got, name)), getattr(ref, name)
        assert g.dtype == r.dtype and g.shape == r.shape, (name, g.dtype, g.shape, r.dtype, r.shape)
        torch.testing.assert_close(g, r, **tol)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss", "GELSY"])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((5, 3), (5, 2)), ((4, 4), (4, 3)), ((3, 5), (3, 2)), ((2, 6, 4), (2, 6, 3)),
    ((3, 2, 4), (3, 2, 1)), ((6, 3), (6,)), ((2, 3, 5), (2, 3)), ((2, 1, 5, 3), (1, 3, 5, 2)),
    ((1, 5, 3), (2, 5, 2)), ((3, 5, 3), (1, 5, 2)), ((0, 5, 3), (0, 5, 2))])
def test_lstsq_matches_lapack_drivers(driver, a_shape, b_shape):
    a = torch.randn(*a_shape, generator=torch.Generator().manual_seed(3))
    b = torch.randn(*b_shape, generator=torch.Generator().manual_seed(4))
    got, ref = lstsq_pair(a, b, driver=driver)
    assert_lstsq_close(got, ref)


@pytest.mark.usefixtures("no_fallback")
def test_lstsq_non_contiguous_inputs_and_rcond():
    base = torch.randn(3, 8, 10, generator=torch.Generator().manual_seed(5))
    a = base[:, 1:7, ::3]  # (3, 6, 4), strided, offset
    b = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(6)).mT
    for driver in ("gels", "gelsy", "gelsd"):
        got = torch.linalg.lstsq(dev(base)[:, 1:7, ::3], dev(b.mT.contiguous()).mT, driver=driver, rcond=1e-3)
        assert_lstsq_close(got, torch.linalg.lstsq(a, b, driver=driver, rcond=1e-3))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("driver", ["gelsd", "gelss"])
def test_lstsq_clearly_rank_deficient_by_svd(driver):
    # rank 2 (a third singular value far below rcond * s1): truncated SVD, no residuals
    g = torch.Generator().manual_seed(7)
    u, _ = torch.linalg.qr(torch.randn(6, 3, generator=g))
    v, _ = torch.linalg.qr(torch.randn(3, 3, generator=g))
    a = u @ torch.diag(torch.tensor([3.0, 1.0, 1e-6])) @ v.mT
    b = torch.randn(6, 2, generator=g)
    got, ref = lstsq_pair(a, b, driver=driver, rcond=1e-3)
    assert cpu(got.rank).item() == ref.rank.item() == 2
    assert_lstsq_close(got, ref)


def test_lstsq_uncertain_rank_goes_to_the_cpu():
    # exactly rank-deficient: gelsy's rank estimate can't be reproduced -> CPU, same answer
    a = torch.randn(5, 3, generator=torch.Generator().manual_seed(8))
    a[:, 2] = a[:, 0] + a[:, 1]
    b = torch.randn(5, 2, generator=torch.Generator().manual_seed(9))
    torch_webgpu._C.reset_fallback_ops_seen()
    for driver in ("gelsy", "gelsd"):
        got, ref = lstsq_pair(a, b, driver=driver)
        assert cpu(got.rank).item() == ref.rank.item() == 2
        assert_lstsq_close(got, ref, tol=dict(rtol=1e-3, atol=1e-3))
    assert "aten::linalg_lstsq.out" in torch_webgpu._C.fallback_ops_seen()


@pytest.mark.usefixtures("no_fallback")
def test_lstsq_out_variant():
    a = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(14))
    b = torch.randn(2, 5, 2)
    outs = [torch.empty(0, device=DEVICE), torch.empty(0, device=DEVICE),
            torch.empty(0, dtype=torch.long, device=DEVICE), torch.empty(0, device=DEVICE)]
    res = torch.linalg.lstsq(dev(a), dev(b), driver="gelsd", out=tuple(outs))
    ref = torch.linalg.lstsq(a, b, driver="gelsd")
    assert all(r is o for r, o in zip(res, outs))
    for o, r in zip(outs, ref):
        torch.testing.assert_close(cpu(o), r, **TOL)


def test_lstsq_errors_match_the_cpu():
    a = torch.randn(5, 3)
    cases = [
        (a, torch.randn(4, 2), {}, r"input.size\(-2\) should match other.size\(-2\)"),
        (a, torch.randn(4), {}, r"input.size\(-2\) should match other.size\(-1\)"),
        (a, torch.randn(5, 2), dict(driver="foo"), r"parameter `driver` should be one of"),
        (torch.randn(5), torch.randn(5), {}, "input must have at least 2 dimensions"),
        (a, torch.randn(5, 2).double(), {}, "Expected input and other to have the same dtype"),
    ]
    for x, y, kw, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            torch.linalg.lstsq(x, y, **kw)
        with pytest.raises(RuntimeError, match=msg):
            torch.linalg.lstsq(dev(x), dev(y), **kw)


def test_lstsq_gradients():
    a = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(14))
    b = torch.randn(2, 5, 2)
    grads = []
    for device in ("cpu", DEVICE):
        x = a.clone().to(device).requires_grad_()
        y = b.clone().to(device).requires_grad_()
        sol, res, _, _ = torch.linalg.lstsq(x, y, driver="gels")
        (sol.sum() + res.sum()).backward()
        grads.append((cpu(x.grad), cpu(y.grad)))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-3, atol=1e-3)


# ---- matrix exponential ----------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (2, 2, 3, 3), (1, 1), (3, 1, 1), (0, 0),
                                   (2, 0, 0), (0, 3, 3)])
def test_matrix_exp(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(10))
    torch.testing.assert_close(cpu(torch.linalg.matrix_exp(dev(a))), torch.linalg.matrix_exp(a),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("no_fallback")
def test_matrix_exp_every_degree_in_one_batch():
    # norms from 1e-9 to 40: degrees 1..18 and several squarings, grouped per batch member
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(11))
    a = a / a.abs().sum(0).max()
    scales = torch.tensor([0.0, 1e-9, 1e-4, 3e-2, 0.5, 1.2, 2.5, 10.0, 40.0])
    batch = a * scales[:, None, None]
    got = cpu(torch.matrix_exp(dev(batch)))
    torch.testing.assert_close(got, torch.linalg.matrix_exp(batch), rtol=1e-5, atol=1e-5)
    assert torch.equal(got[0], torch.eye(4))


@pytest.mark.usefixtures("no_fallback")
def test_matrix_exp_non_contiguous():
    base = torch.randn(3, 6, 6, generator=torch.Generator().manual_seed(12))
    a = base[:, ::2, 1::2]
    torch.testing.assert_close(cpu(torch.linalg.matrix_exp(dev(base)[:, ::2, 1::2])),
                               torch.linalg.matrix_exp(a), rtol=1e-5, atol=1e-5)


def test_matrix_exp_errors_and_float64():
    for x, msg in [(torch.randn(3, 4), "A must be batches of square matrices"),
                   (torch.randn(3), "at least 2 dimensions"),
                   (torch.ones(3, 3, dtype=torch.long), "Expected a floating point or complex tensor")]:
        with pytest.raises(RuntimeError, match=msg):
            torch.linalg.matrix_exp(x)
        with pytest.raises(RuntimeError, match=msg):
            torch.linalg.matrix_exp(dev(x))
    a = torch.randn(3, 3, dtype=torch.float64)
    torch.testing.assert_close(cpu(torch.linalg.matrix_exp(dev(a))), torch.linalg.matrix_exp(a))


def test_matrix_exp_gradient():
    a = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(13))
    grads = []
    for device in ("cpu", DEVICE):
        x = a.clone().to(device).requires_grad_()
        torch.linalg.matrix_exp(x).sum().backward()
        grads.append(cpu(x.grad))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-4)


# ---- pseudo-inverse --------------------------------------------------------------------

@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3), (2, 0, 3)])
def test_pinv(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(15))
    torch.testing.assert_close(cpu(torch.linalg.pinv(dev(a))), torch.linalg.pinv(a), **TOL)
    torch.testing.assert_close(cpu(torch.linalg.pinv(dev(a), rtol=0.3)), torch.linalg.pinv(a, rtol=0.3), **TOL)
    torch.testing.assert_close(cpu(torch.linalg.pinv(dev(a), atol=0.5)), torch.linalg.pinv(a, atol=0.5), **TOL)


@pytest.mark.usefixtures("no_fallback")
def test_pinv_hermitian_and_rank_deficient():
    g = torch.Generator().manual_seed(16)
    x = torch.randn(2, 5, 3, generator=g)
    sym = x @ x.mT  # rank 3 of 5
    torch.testing.assert_close(cpu(torch.linalg.pinv(dev(sym), hermitian=True)),
                               torch.linalg.pinv(sym, hermitian=True), rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(cpu(torch.linalg.pinv(dev(sym))), torch.linalg.pinv(sym), rtol=1e-3, atol=1e-4)


def test_pinv_gradient():
    a = torch.randn(4, 3, generator=torch.Generator().manual_seed(17))
    grads = []
    for device in ("cpu", DEVICE):
        x = a.clone().to(device).requires_grad_()
        torch.linalg.pinv(x).sum().backward()
        grads.append(cpu(x.grad))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-3, atol=1e-3)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank(hermitian):
    g = torch.Generator().manual_seed(18)
    x = torch.randn(3, 6, 2, generator=g)
    cases = [x @ x.mT,                                    # rank 2 of 6
             torch.randn(2, 5, 5, generator=g),           # full rank
             torch.zeros(4, 4), torch.zeros(2, 0, 0), torch.zeros(0, 3, 3)]
    if not hermitian:
        cases += [torch.randn(4, 7, generator=g), torch.zeros(2, 3, 0)]
    for a in cases:
        for kw in ({}, {"atol": 1.0}, {"rtol": 0.5}, {"atol": 0.1, "rtol": 0.2},
                   {"atol": torch.tensor(0.5), "rtol": torch.tensor(0.1)}):
            dkw = {k: dev(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
            actual = torch.linalg.matrix_rank(dev(a), hermitian=hermitian, **dkw)
            expected = torch.linalg.matrix_rank(a, hermitian=hermitian, **kw)
            assert actual.device.type == DEVICE and torch.equal(cpu(actual), expected), (a.shape, kw)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.linalg.matrix_rank(dev(torch.ones(3)))


# ---- Bunch-Kaufman LDL^T ---------------------------------------------------------------

def symmetric_indefinite(*shape, seed=0, symmetric=True):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return x + x.mT if symmetric else x  # only the lower triangle is read


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (4, 6, 6), (2, 3, 9, 9), (0, 4, 4), (3, 0, 0)])
@pytest.mark.parametrize("symmetric", [True, False])
def test_ldl_factor_pivots_match_lapack(shape, symmetric):
    a = symmetric_indefinite(*shape, seed=18, symmetric=symmetric)
    got = torch.linalg.ldl_factor_ex(dev(a))
    ref = torch.linalg.ldl_factor_ex(a)
    assert torch.equal(cpu(got.pivots), ref.pivots) and torch.equal(cpu(got.info), ref.info)
    torch.testing.assert_close(cpu(got.LD), ref.LD, **TOL)


@pytest.mark.usefixtures("no_fallback")
def test_ldl_two_by_two_pivots_and_zero_columns():
    a = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])  # needs 2x2 blocks
    got, ref = torch.linalg.ldl_factor_ex(dev(a)), torch.linalg.ldl_factor_ex(a)
    assert (ref.pivots < 0).any() and torch.equal(cpu(got.pivots), ref.pivots)
    torch.testing.assert_close(cpu(got.LD), ref.LD, **TOL)
    z = torch.zeros(2, 3, 3)
    got, ref = torch.linalg.ldl_factor_ex(dev(z)), torch.linalg.ldl_factor_ex(z)
    assert torch.equal(cpu(got.info), ref.info) and torch.equal(cpu(got.pivots), ref.pivots)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("ld_batch,b_shape", [((), (5, 2)), ((3,), (3, 5, 1)), ((3,), (5, 4)),
                                              ((), (2, 5, 3)), ((3,), (1, 5, 2)), ((2,), (2, 5, 0))])
def test_ldl_solve(ld_batch, b_shape):
    a = symmetric_indefinite(*ld_batch, 5, 5, seed=19)
    LD, piv = torch.linalg.ldl_factor(a)
    b = torch.randn(*b_shape, generator=torch.Generator().manual_seed(20))
    got = torch.linalg.ldl_solve(dev(LD), dev(piv), dev(b))
    torch.testing.assert_close(cpu(got), torch.linalg.ldl_solve(LD, piv, b), **TOL)
    # int64 pivots are accepted as well
    got = torch.linalg.ldl_solve(dev(LD), dev(piv.long()), dev(b))
    torch.testing.assert_close(cpu(got), torch.linalg.ldl_solve(LD, piv, b), **TOL)


@pytest.mark.usefixtures("no_fallback")
def test_ldl_non_contiguous_and_out():
    base = symmetric_indefinite(2, 8, 8, seed=21)
    a = base[:, 1:7, 1:7].mT
    LD, piv, info = (torch.empty(0, device=DEVICE), torch.empty(0, dtype=torch.int32, device=DEVICE),
                     torch.empty(0, dtype=torch.int32, device=DEVICE))
    res = torch.linalg.ldl_factor_ex(dev(base)[:, 1:7, 1:7].mT, out=(LD, piv, info))
    ref = torch.linalg.ldl_factor_ex(a)
    assert res.LD is LD and torch.equal(cpu(piv), ref.pivots)
    torch.testing.assert_close(cpu(LD), ref.LD, **TOL)
    b = torch.randn(2, 3, 6).mT
    out = torch.empty(0, device=DEVICE)
    torch.linalg.ldl_solve(LD, piv, dev(b), out=out)
    torch.testing.assert_close(cpu(out), torch.linalg.ldl_solve(ref.LD, ref.pivots, b), **TOL)


def test_ldl_errors_match_the_cpu():
    LD, piv = torch.linalg.ldl_factor(torch.eye(3))
    cases = [
        (lambda d: torch.linalg.ldl_factor(d(torch.zeros(3, 4))), "A must be batches of square matrices"),
        (lambda d: torch.linalg.ldl_solve(d(LD), d(piv.float()), d(torch.randn(3, 2))),
         "Expected pivots to be integers"),
        (lambda d: torch.linalg.ldl_solve(d(LD), d(piv), d(torch.randn(4, 2))), "Incompatible matrix sizes"),
        (lambda d: torch.linalg.ldl_solve(d(LD), d(piv[:2]), d(torch.randn(3, 2))),
         r"Expected LD.shape\[:-1\] and pivots.shape to be the same"),
    ]
    for fn, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            fn(lambda t: t)
        with pytest.raises(RuntimeError, match=msg):
            fn(dev)
    with pytest.raises(RuntimeError):  # check_errors on a zero pivot column, as the CPU
        torch.linalg.ldl_factor(dev(torch.zeros(3, 3)))


def test_eigh_batch_of_nearly_equal_eigenvalues():
    # Matrices near 16 I need many Jacobi sweeps: a batch where some never reached the old
    # float32-unreachable stopping test ran past llvmpipe's loop budget and came back as
    # zeros. Sweeps now stop when no pair needs a rotation, capped by the budget.
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(100, 12, 12, generator=g) * 8 - 4) * 0.1 + 4 * torch.eye(12)
    spd = a @ a.mT
    w, v = torch.linalg.eigh(spd.to("webgpu"))
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(spd), rtol=1e-5, atol=2e-4)
    torch.testing.assert_close((v @ torch.diag_embed(w) @ v.mT).cpu(), spd, rtol=1e-5, atol=2e-4)
    s = torch.linalg.svdvals(a.to("webgpu"))
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a), rtol=1e-5, atol=1e-4)


# ---- output layout -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5, 5), (2, 4, 4), (3, 1, 3, 3)])
def test_results_have_the_cpu_column_major_strides(shape):
    """LAPACK results come back column-major from the CPU (and from the meta functions
    torch.compile checks extern kernel outputs against): ours have the same strides."""
    a = spd(*shape, seed=4)
    b = torch.randn(*shape[:-1], 2, generator=torch.Generator().manual_seed(5))
    tri = torch.linalg.cholesky(a)
    geq, tau = torch.geqrf(torch.randn(*shape, generator=torch.Generator().manual_seed(6)))
    cases = [
        (torch.cholesky, (a,), {}), (torch.cholesky, (a,), dict(upper=True)),
        (torch.cholesky_inverse, (tri,), {}), (torch.cholesky_solve, (b, tri), {}),
        (torch.cholesky_solve, (b, tri.mT), dict(upper=True)),
        (torch.linalg.householder_product, (geq, tau), {}),
        (torch.ormqr, (geq, tau, b), {}), (torch.ormqr, (geq, tau, b.mT), dict(left=False)),
        (torch.linalg.solve_triangular, (tri, b), dict(upper=False)),
        (torch.linalg.solve_triangular, (tri.mT, b.mT), dict(upper=True, left=False)),
    ]
    for fn, args, kw in cases:
        actual = fn(*[dev(t) for t in args], **kw)
        expected = fn(*args, **kw)
        assert actual.stride() == expected.stride(), (fn.__name__, kw)
        torch.testing.assert_close(cpu(actual), expected, **TOL)


def test_solve_triangular_out_resized_column_major():
    tri = torch.linalg.cholesky(spd(4, 4, seed=7))
    b = torch.randn(4, 3, generator=torch.Generator().manual_seed(8))
    out, out_cpu = torch.empty(0, device=DEVICE), torch.empty(0)
    torch.linalg.solve_triangular(dev(tri), dev(b), upper=False, out=out)
    torch.linalg.solve_triangular(tri, b, upper=False, out=out_cpu)
    assert out.stride() == out_cpu.stride()
    torch.testing.assert_close(cpu(out), out_cpu, **TOL)
