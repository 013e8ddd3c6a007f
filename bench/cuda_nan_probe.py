"""Where does bf16 training on CUDA go non-finite? On an H100 (torch 2.11) one of the two trainings of
tests/test_cuda.py went non-finite at step 2 in each of two runs. Found by section (4) and `step`:
torch.compile's backward of the conv head's bf16 amax read memory it never wrote; the head now pools
in float32 (bench/results/cuda_nan_probe-nvidia-h100-80gb-hbm3.txt). This runs the test's tiny config
(1) in a plain loop under variants (channels_last, cuDNN benchmark, amp, batch norm in float32,
heads, widths), reporting the first non-finite step and the parameters whose gradients broke;
(2) through the Trainer, as `train` drives it, several times with cuDNN's benchmark on and off, counting the runs that
stopped; (3) once with a hook on every module, naming the first non-finite gradient; (4) through the Trainer
after filling the CUDA caching allocator's free blocks with NaN: a kernel that reads memory it never wrote
then fails every time (in the test file the trainings follow inference tests, whose freed blocks are reused).
Run on a GPU machine: `python bench/cuda_nan_probe.py [SECTION ...]` with sections loops, trainer, hooks,
poison, step (default: all but step); a diagnostic, it writes no result file."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_cuda import poison_cache, tiny_cuda_training  # noqa: E402
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
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # (torch's stubs)
    if bn_fp32:
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                f = m.forward
                m.forward = lambda x, f=f: f(x.float())  # type: ignore[method-assign,misc]  # the variant
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


def stopped_trainings(runs: int, benchmark: bool = True, compile: bool = False, poison: bool = False) -> list[str]:
    """The test's training through the Trainer, as `train` drives it, `runs` times (each after
    poison_cache() if poison): why each run that stopped for a non-finite loss stopped."""
    stopped = []
    for i in range(runs):
        if poison:
            poison_cache()
        cfg = tiny_cuda_training(steps=40, eval_every=20, checkpoint_every=10**6, compile=compile)
        with tempfile.TemporaryDirectory() as tmp:
            trainer = Trainer(cfg, tmp)
            torch.backends.cudnn.benchmark = benchmark  # the Trainer turns it on; the variant decides
            trainer.set_data(*examples.split_by_game(cfg.test_fraction, cfg.seed))
            result = trainer.run(cfg.steps)
            trainer.close()
            if result.stopped:
                stopped.append(f"run {i}: {result.stopped[:60]}")
    return stopped


def poisoned_first_step(wanted: list[str]) -> None:
    """Two Trainer steps by hand after poison_cache(), under variants (those whose names end with
    one of `wanted`, or all): which loss terms, gradients, weights and batch-norm buffers are non-finite."""
    import torch.nn.functional as F

    from drmario.learn.net import heads_to_outputs

    def conv_head(pool_fp32: bool, amax: bool):  # the conv head, its values pooled otherwise
        def heads(self, x, legal=None):
            logits = self.policy_conv(x).flatten(1)
            v = F.leaky_relu(self.pool(x), self.cfg.leak).flatten(2)
            v = v.float() if pool_fp32 else v
            scalars = self.value_fc(torch.cat([v.mean(dim=2), v.amax(dim=2) if amax else v.mean(dim=2)], dim=1))
            return heads_to_outputs(scalars, logits, legal)

        return heads

    tiny = NetConfig(filters=16, blocks=2, planes=24)
    variants: dict[str, dict[str, Any]] = {
        "compiled": {},
        "compiled, no channels_last": {"channels_last": False},
        "compiled, no amp": {"amp": False},
        "eager": {"compile": False},
        "compiled, head design": {"net": tiny.replace(head="design")},
        "compiled, head alphago": {"net": tiny.replace(head="alphago")},
        "compiled, conv head pooled in fp32": {"patch": conv_head(True, True)},
        "compiled, conv head without amax": {"patch": conv_head(False, False)},
    }
    original_heads = DrMarioNet.heads
    for name, kw in variants.items():
        if wanted and not name.endswith(tuple(wanted)):
            continue
        kw = dict(kw)
        DrMarioNet.heads = kw.pop("patch", original_heads)  # type: ignore[method-assign]  # the variant
        poison_cache()
        cfg = tiny_cuda_training(**({"compile": True} | kw))
        with tempfile.TemporaryDirectory() as tmp:
            trainer = Trainer(cfg, tmp)
            trainer.set_data(*examples.split_by_game(cfg.test_fraction, cfg.seed))
            model, report, train_dev = trainer.model, [], trainer.train_dev
            assert train_dev is not None  # (set_data)
            for step in (1, 2):
                batch = train_dev.batch(trainer.perm[(step - 1) * 64 : step * 64])
                trainer.opt.zero_grad(set_to_none=True)
                terms = forward_backward(trainer.net, batch, cfg, model, dev)
                grads = [n for n, q in model.named_parameters() if q.grad is not None and not q.grad.isfinite().all()]
                trainer.opt.step()
                weights = [n for n, q in model.named_parameters() if not q.isfinite().all()]
                buffers = [n for n, b in model.named_buffers() if b.is_floating_point() and not b.isfinite().all()]
                report.append(
                    f"step {step}: terms finite {bool(terms.isfinite().all())}, bad grads {grads[:4]} ({len(grads)}),"
                    f" bad weights after {weights[:3]} ({len(weights)}), bad buffers {buffers[:3]} ({len(buffers)})"
                )
            trainer.close()
        DrMarioNet.heads = original_heads  # type: ignore[method-assign]
        print(f"{name}:\n  " + "\n  ".join(report), flush=True)


def module_hooks() -> None:
    """The default variant once, with a hook on every module: the first with a non-finite grad."""
    cfg = TrainConfig(net=NetConfig(filters=16, blocks=2, planes=24), device="cuda")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = DrMarioNet(cfg.net).to(dev).to(memory_format=torch.channels_last)  # type: ignore[call-overload]
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


def loops() -> None:
    run("default (as the test)")
    run("no channels_last", channels_last=False)
    run("no cudnn.benchmark", benchmark=False)
    run("no amp", amp=False)
    run("bn in fp32", bn_fp32=True)
    run("head design", net={"head": "design"})
    run("filters 32", net={"filters": 32})
    run("filters 64 blocks 4", net={"filters": 64, "blocks": 4})
    run("design net f256 r19", steps=8, net={"filters": 256, "blocks": 19})


if __name__ == "__main__":
    t = time.perf_counter()
    print(torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name(0))
    sections = sys.argv[1:2] or ["loops", "trainer", "hooks", "poison"]  # step VARIANT...: those variants
    if "poison" in sections:
        for compile in (False, True):
            stopped = stopped_trainings(3, compile=compile, poison=True)
            print(f"poisoned cache, train() x3, compile={compile}: {len(stopped)} stopped {stopped}", flush=True)
    if "step" in sections:
        poisoned_first_step(sys.argv[2:])
    if "loops" in sections:
        loops()
    if "trainer" in sections:
        for benchmark in (True, False):
            stopped = stopped_trainings(6, benchmark=benchmark)
            print(f"train() x6, cudnn.benchmark={benchmark}: {len(stopped)} stopped {stopped}", flush=True)
    if "hooks" in sections:
        module_hooks()
    print(f"{time.perf_counter() - t:.0f} s")
