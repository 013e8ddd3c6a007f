"""Where does bf16 training on CUDA go non-finite? On an H100 (torch 2.11) one of the two trainings of
tests/test_cuda.py went non-finite at step 2 in each of two runs. This runs the test's tiny config
(1) in a plain loop under variants (channels_last, cuDNN benchmark, amp, batch norm in float32,
heads, widths), reporting the first non-finite step and the parameters whose gradients broke;
(2) through the Trainer, as `train` drives it, several times with cuDNN's benchmark on and off, counting the runs that
stopped; (3) once with a hook on every module, naming the first non-finite gradient.
Run on a GPU machine: `python bench/cuda_nan_probe.py` (a diagnostic; it writes no result file)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_cuda import tiny_cuda_training  # noqa: E402
from test_net import real_examples  # noqa: E402

from drmario.learn.dataset import DeviceExamples  # noqa: E402
from drmario.learn.net import DrMarioNet, NetConfig  # noqa: E402
from drmario.learn.train import (  # noqa: E402
    TrainConfig,
    Trainer,
    autocast,
    forward_backward,
    loss_terms,
    make_optimizer,
)

examples = real_examples(n_games=8, seed=3)
dev = torch.device("cuda")


def run(name: str, steps: int = 30, **kw) -> None:
    net_kw = {"filters": 16, "blocks": 2, "planes": 24, **kw.pop("net", {})}
    bench = kw.pop("benchmark", True)
    bn_fp32 = kw.pop("bn_fp32", False)
    cfg = TrainConfig(net=NetConfig(**net_kw), optimizer="adamw", lr=3e-3, batch_size=64, device="cuda", **kw)
    torch.backends.cudnn.benchmark = bench
    torch.manual_seed(0)
    model = DrMarioNet(cfg.net).to(dev)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if bn_fp32:
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                f = m.forward
                m.forward = lambda x, f=f: f(x.float())
    opt = make_optimizer(model, cfg)
    data = DeviceExamples(examples, dev, cfg.net.planes)
    bad_grads: list[str] = []
    first = None
    for step in range(steps):
        idx = torch.randint(0, len(data), (64,), device=dev, generator=None)
        opt.zero_grad(set_to_none=True)
        terms = forward_backward(model, data.batch(idx), cfg, model, dev)  # the Trainer's step, without it
        if not torch.isfinite(terms).all():
            first = first or f"loss at step {step + 1}"
        bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
        if bad and first is None:
            first = f"gradient at step {step + 1}"
            bad_grads = bad
        opt.step()
        if first:
            break
    print(f"{name:28s} {first or 'finite for ' + str(steps) + ' steps'} {bad_grads[:6]}", flush=True)


def trainer_runs(benchmark: bool, runs: int = 6) -> None:
    """The Trainer as `train` drives it, `runs` times: how many stop for a non-finite loss."""
    stopped = []
    for i in range(runs):
        cfg = tiny_cuda_training(steps=40, eval_every=10**6, checkpoint_every=10**6)
        with tempfile.TemporaryDirectory() as tmp:
            trainer = Trainer(cfg, tmp)
            torch.backends.cudnn.benchmark = benchmark  # the Trainer turns it on; the variant decides
            trainer.set_data(*examples.split_by_game(cfg.test_fraction, cfg.seed))
            result = trainer.run(cfg.steps)
            trainer.close()
            if result.stopped:
                stopped.append(f"run {i}: {result.stopped[:40]}")
    print(f"train() x{runs}, cudnn.benchmark={benchmark}: {len(stopped)} stopped {stopped}", flush=True)


def module_hooks() -> None:
    """The default variant once, with a hook on every module: the first with a non-finite grad."""
    cfg = TrainConfig(net=NetConfig(filters=16, blocks=2, planes=24), device="cuda")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = DrMarioNet(cfg.net).to(dev).to(memory_format=torch.channels_last)
    seen: list[str] = []
    for name, m in model.named_modules():
        if name:
            m.register_full_backward_hook(
                lambda mod, gin, gout, name=name: seen.append(
                    f"{name} {type(mod).__name__} out_ok={all(g is None or bool(g.isfinite().all()) for g in gout)}"
                    f" in_ok={all(g is None or bool(torch.isfinite(g).all()) for g in gin)}"
                    f" out_dtype={[g.dtype for g in gout if g is not None]}"
                )
            )
    data = DeviceExamples(examples, dev, 24)
    batch = data.batch(torch.arange(64, device=dev))
    with autocast(dev, cfg):
        out = model(batch.planes.contiguous(memory_format=torch.channels_last))
    terms = loss_terms(out, batch, cfg.net, model)
    print("forward finite:", {k: bool(torch.isfinite(v).all()) for k, v in out._asdict().items() if k != "log_moves"})
    terms["total"].backward()
    for line in seen:
        print("  ", line)


if __name__ == "__main__":
    t = time.perf_counter()
    print(torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name(0))
    run("default (as the test)")
    run("no channels_last", channels_last=False)
    run("no cudnn.benchmark", benchmark=False)
    run("no amp", amp=False)
    run("bn in fp32", bn_fp32=True)
    run("head design", net={"head": "design"})
    run("filters 32", net={"filters": 32})
    run("filters 64 blocks 4", net={"filters": 64, "blocks": 4})
    run("design net f256 r19", steps=8, net={"filters": 256, "blocks": 19})
    trainer_runs(benchmark=True)
    trainer_runs(benchmark=False)
    module_hooks()
    print(f"{time.perf_counter() - t:.0f} s")
