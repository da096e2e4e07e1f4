"""How far PyTorch gets on CUDA: a list of steps, from CUDA's start to
kernels, cuBLAS and cuBLASLt, each run on its own and reported as `ok STEP: detail`
or `FAIL STEP: error`, so one run records exactly where a backend stops
(issue 6). Results are checked against the same computation on the CPU.

    python3 tests/apps/pytorch_steps.py

scripts/try-pytorch.sh runs it through Wormhole; run natively, it is the
reference.
"""
import sys

import torch


def steps():
    """(name, function returning a detail string) in the order run."""
    state = {}

    def available():
        assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
        return f"{torch.cuda.device_count()} device(s)"

    def properties():
        p = torch.cuda.get_device_properties(0)
        return f"{p.name}, {p.total_memory >> 20} MiB"

    def to_device():
        x = torch.arange(1 << 16, dtype=torch.float32)
        state["x"], state["y"] = x, x.to("cuda")
        return str(state["y"].device)

    def back():
        assert torch.equal(state["y"].cpu(), state["x"]), "values differ"
        return "64 Ki floats round trip"

    def pinned():
        p = torch.arange(6.0).pin_memory()
        assert p.is_pinned(), "not reported as pinned"
        q = p.to("cuda", non_blocking=True)
        r = torch.empty(6).pin_memory()
        r.copy_(q, non_blocking=True)
        torch.cuda.synchronize()
        assert torch.equal(r, p), "values differ"
        return "pinned, copied both ways without blocking"

    def streams_and_events():
        s = torch.cuda.Stream()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(s):
            start.record()
            z = state["y"].clone()
            end.record()
        torch.cuda.synchronize()
        assert torch.equal(z.cpu(), state["x"]), "clone on a side stream differs"
        return f"clone on a side stream, {start.elapsed_time(end):.3f} ms by events"

    def memory():
        held = torch.cuda.memory_allocated()
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        return f"{held} B allocated, {free >> 20} of {total >> 20} MiB free"

    def kernel():
        z = (state["y"] * 2 + 1).sum()
        want = (state["x"] * 2 + 1).sum()
        assert torch.isclose(z.cpu(), want), f"{z.item()} != {want.item()}"
        return f"sum(2x+1) = {z.item():.0f}"

    def matmul():
        a = torch.randn(64, 32, generator=torch.Generator().manual_seed(1))
        b = torch.randn(32, 16, generator=torch.Generator().manual_seed(2))
        c = (a.cuda() @ b.cuda()).cpu()
        assert torch.allclose(c, a @ b, atol=1e-4), "product differs"
        return "64x32 @ 32x16 (cuBLAS)"

    def half_matmul():
        g = torch.Generator().manual_seed(5)
        a = torch.randn(48, 32, generator=g).half()
        b = torch.randn(32, 24, generator=g).half()
        # Half in, half out; the reference in float from the same halves.
        c = (a.cuda() @ b.cuda()).cpu().float()
        want = a.float() @ b.float()
        assert torch.allclose(c, want, atol=2e-2, rtol=1e-2), "product differs"
        return "48x32 @ 32x24 in half precision (cublasGemmEx)"

    def more_matmuls():
        g = torch.Generator().manual_seed(6)
        a = torch.randn(3, 16, 8, generator=g)
        b = torch.randn(3, 8, 12, generator=g)
        got = torch.bmm(a.cuda(), b.cuda()).cpu()
        assert torch.allclose(got, torch.bmm(a, b), atol=1e-4), "bmm differs"
        d = torch.randn(20, 10, generator=g, dtype=torch.float64)
        got = (d.cuda() @ d.t().cuda()).cpu()
        assert torch.allclose(got, d @ d.t(), atol=1e-10), "double product differs"
        h = torch.randn(16, 24, generator=g).bfloat16()
        got = (h.cuda() @ h.t().cuda()).cpu().float()
        assert torch.allclose(got, h.float() @ h.t().float(), atol=0.25, rtol=2e-2), "bfloat16 product differs"
        z = torch.randn(12, 9, generator=g, dtype=torch.complex64)
        got = (z.cuda() @ z.t().cuda()).cpu()
        assert torch.allclose(got, z @ z.t(), atol=1e-4), "complex product differs"
        return "bmm 3x16x8 @ 3x8x12, double 20x10 @ 10x20, bfloat16 16x24 @ 24x16, complex 12x9 @ 9x12"

    def linear():
        torch.manual_seed(4)
        layer = torch.nn.Linear(32, 16)
        x = torch.randn(8, 32)
        want = layer(x)
        got = layer.cuda()(x.cuda()).cpu()
        assert torch.allclose(got, want, atol=1e-4), "output differs"
        return "nn.Linear(32, 16) on 8 rows (addmm with a bias: cuBLASLt)"

    def linear_algebra(library):
        """torch.linalg's factorisations, with PyTorch's choice of backend
        (`default`: cuSOLVER or MAGMA, which calls cuBLAS's triangular
        routines) or cuSOLVER's alone."""

        def run():
            previous = torch.backends.cuda.preferred_linalg_library()
            torch.backends.cuda.preferred_linalg_library(library)
            try:
                return factorise() + f", {library} backend"
            finally:
                torch.backends.cuda.preferred_linalg_library(previous)

        return run

    def factorise():
        g = torch.Generator().manual_seed(7)
        m = torch.randn(16, 16, generator=g, dtype=torch.float64)
        spd = m @ m.t() + 16 * torch.eye(16, dtype=torch.float64)
        rhs = torch.randn(16, 3, generator=g, dtype=torch.float64)
        chol = torch.linalg.cholesky(spd.cuda()).cpu()
        assert torch.allclose(chol @ chol.t(), spd, atol=1e-9), "Cholesky factor differs"
        x = torch.linalg.solve(m.cuda(), rhs.cuda()).cpu()
        assert torch.allclose(m @ x, rhs, atol=1e-9), "solution differs"
        tall = torch.randn(24, 12, generator=g, dtype=torch.float64)
        q, r = (t.cpu() for t in torch.linalg.qr(tall.cuda()))
        assert torch.allclose(q @ r, tall, atol=1e-9), "QR differs"
        w, v = (t.cpu() for t in torch.linalg.eigh(spd.cuda()))
        assert torch.allclose(spd @ v, v * w, atol=1e-8), "eigenpairs differ"
        u, sv, vh = (t.cpu() for t in torch.linalg.svd(tall.cuda(), full_matrices=False))
        assert torch.allclose(u * sv @ vh, tall, atol=1e-9), "SVD differs"
        return "Cholesky, LU solve, QR, eigh and SVD of 16x16 to 24x12 doubles"

    def cnn_training(cudnn):
        """A few SGD steps of a small CNN on random MNIST-shaped data, the
        same on the CPU: with cuDNN (PyTorch's default) or without (its own
        im2col kernels and cuBLAS)."""

        def train(device):
            torch.manual_seed(11)
            net = torch.nn.Sequential(
                torch.nn.Conv2d(1, 8, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(8, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Flatten(), torch.nn.Linear(256, 10),
            ).to(device)
            g = torch.Generator().manual_seed(12)
            x = torch.randn(64, 1, 28, 28, generator=g)
            y = torch.randint(0, 10, (64,), generator=g)
            x, y = x.to(device), y.to(device)
            opt = torch.optim.SGD(net.parameters(), lr=0.05)
            losses = []
            for _ in range(20):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(net(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            return losses

        def run():
            with torch.backends.cudnn.flags(enabled=cudnn):
                got = train("cuda")
            want = train("cpu")
            assert got[-1] < got[0], f"loss did not fall: {got[0]:.3f} -> {got[-1]:.3f}"
            assert abs(got[-1] - want[-1]) < 0.05, f"final loss {got[-1]:.4f}, CPU {want[-1]:.4f}"
            how = "cuDNN" if cudnn else "without cuDNN"
            return f"20 SGD steps of a 2-conv CNN, 64 images 1x28x28, {how}: loss {got[0]:.3f} -> {got[-1]:.3f}"

        return run

    def random():
        g = torch.Generator(device="cuda").manual_seed(3)
        r = torch.rand(1000, device="cuda", generator=g)
        m = r.mean().item()
        assert 0.4 < m < 0.6, f"mean {m}"
        return f"mean of 1000 uniforms {m:.3f}"

    return [
        ("cuda available", available),
        ("device properties", properties),
        ("copy to the device", to_device),
        ("copy back", back),
        ("pinned memory", pinned),
        ("streams and events", streams_and_events),
        ("memory queries", memory),
        ("a kernel", kernel),
        ("matmul", matmul),
        ("half-precision matmul", half_matmul),
        ("more matmuls", more_matmuls),
        ("linear layer", linear),
        ("linear algebra", linear_algebra("default")),
        ("linear algebra, cuSOLVER", linear_algebra("cusolver")),
        ("random numbers", random),
        ("CNN training without cuDNN", cnn_training(False)),
        ("CNN training with cuDNN", cnn_training(True)),
    ]


def main():
    print(f"ok import: torch {torch.__version__}, CUDA {torch.version.cuda}")
    failed = 0
    for name, f in steps():
        try:
            print(f"ok {name}: {f()}", flush=True)
        except Exception as e:  # a step's failure is the record, not the end
            failed += 1
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"FAIL {name}: {first}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
