"""What the three ops share at the op boundary: the sink-mode enum, the test for the eager fast
path, the per-signature plan cache, the opt-in checked mode and the torch.library namespace.

Every op module (window.py, prefill.py, decode.py) has the same shape:
  * `<Op>Args`: one validated call as every backend receives it (backends.py's interface);
  * a plan per call signature (dtypes, devices, head counts, strides, scalars; never token or
    batch counts, so a serving loop hits a handful of entries): the validation, the backend
    choice and the backend's prepared launcher, all done once;
  * `run(...)`: key -> plan -> per-call checks -> outputs -> launch; what both the public
    function (eagerly, no dispatcher) and the torch.library op's kernel call;
  * the torch.library definitions (schema, kernel, fake) and the public function.
"""
from __future__ import annotations

import enum
import os

import torch

from sinkops import backends

# torch.ops.sinkops.*: the low-level Library API (define + impl + register_fake) instead of
# @torch.library.custom_op, whose Python wrapper costs ~35-70 µs per call (bench/NOTES.md,
# "Dispatch"); a Python kernel behind the dispatcher costs ~4 µs.
LIB = torch.library.Library("sinkops", "DEF")


def register_functional_op(name: str, schema: str, returns: str, kernel, fake) -> None:
    """Defines sinkops::<name> (`schema -> returns`) with one Python kernel for every backend key
    (CompositeExplicitAutograd) and a fake for tracing."""
    LIB.define(f"{name}({schema}) -> {returns}")
    LIB.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"sinkops::{name}", fake, lib=LIB)


def register_op(name: str, schema: str, returns: str, outs: str, kernel, kernel_out, fake) -> None:
    """Defines sinkops::<name> (functional) and sinkops::<name>_out (the same arguments plus the
    keyword-only mutated outputs `outs`; its fake returns nothing)."""
    register_functional_op(name, schema, returns, kernel, fake)
    register_functional_op(f"{name}_out", f"{schema}, *, {outs}", "()", kernel_out, lambda *args, **outputs: None)


def backward_backend(name: str, op: str) -> str:
    """The backend the backward of a call made with backend=`name` runs on: the same one when it
    has the backward op for every call its forward takes, else auto, which takes it wherever it
    can (a SYCL forward trains with the Triton or torch backward; a CUDA forward with the CUDA
    window backward on Hopper, else Triton's: docs/DECISIONS.md)."""
    b = backends.get(name) if name != "auto" else None
    if b is not None and op in getattr(b, "ops", ()) and not getattr(b, "partial_backward", False):
        return name
    return "auto"


class SinkMode(enum.IntEnum):
    """sinkops::SinkMode (csrc/include/sinkops/types.h); checked against the compiled modules."""
    NONE = 0
    KEY0 = 1
    NULL = 2


SINK_MODE_NAMES = {"key0": SinkMode.KEY0, "null": SinkMode.NULL, "none": SinkMode.NONE}

_check_inputs = os.environ.get("SINKOPS_CHECK_INPUTS", "0") == "1"


def set_input_checks(enabled: bool) -> None:
    """Checked mode (also SINKOPS_CHECK_INPUTS=1): device-side index tensors (cu_seqlens,
    topk_length) are validated like CPU ones, with one host sync per call, and raise the same
    ValueError. Off by default: without it no value of theirs can cause an out-of-bounds access
    either (docs/DESIGN.md §2), but a wrong value gives a wrong answer. Not during graph capture."""
    global _check_inputs
    _check_inputs = bool(enabled)
    for plans in PlanCache.ALL:  # plans remember whether they check: make them again
        plans.clear()


def checked_mode_possible() -> bool:
    """Whether checked mode is on now (plans of device tensors skip value checks otherwise)."""
    return _check_inputs


def check_values(device: torch.device) -> bool:
    """Whether this call validates the values of its index tensors: always on CPU (no sync),
    on a device in checked mode, never while a CUDA graph is being captured."""
    if device.type == "cpu":
        return True
    return _check_inputs and not (device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def eager(q, *grad_inputs) -> bool:
    """True when a call may go straight to the launcher: a plain tensor (no FakeTensor, no
    functional or other subclass), nothing tracing it (torch.compile, make_fx, dispatch modes)
    and nothing that wants a gradient. Everything else goes through torch.ops.sinkops.*."""
    # is_compiling() first (in plain()): dynamo folds it to True, and must not trace the C calls after it.
    return plain(q) and not wants_grad(q, *grad_inputs)


_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def plain(q) -> bool:
    """Eager on a plain tensor: nothing tracing (torch.compile, make_fx, dispatch modes) and no
    torch.func transform (whose wrapped tensors still have type torch.Tensor)."""
    return not (torch.compiler.is_compiling() or type(q) is not torch.Tensor or torch._C._len_torch_dispatch_stack()
                or _functorch_active())


def autograd_function(name: str, forward, setup_context, backward):
    """The eager training path: an autograd.Function over the op's functional kernel, reusing the
    formula registered on torch.ops.sinkops.<name> (setup_context, backward). It skips the
    dispatcher and register_autograd's generic wrapper (~100 µs of Python per step, measured);
    torch.compile traces the registered one. Gradients of unused outputs arrive as None."""

    def fwd(ctx, *inputs):
        output = forward(*inputs)
        setup_context(ctx, inputs, output)
        ctx.direct = True  # the backward may call the backward op's run() straight away too
        ctx.set_materialize_grads(False)
        return output

    return type(f"{name}_autograd", (torch.autograd.Function,),
                dict(forward=staticmethod(fwd), backward=staticmethod(backward))).apply


def register_autograd(name: str, kernel, setup_context, backward) -> None:
    """The backward formula of sinkops::<name> (functional; kernel = its Python kernel), twice:
    EAGER_AUTOGRAD[name], the public functions' autograd path (autograd_function), and the op's
    Autograd kernel for torch.ops callers. That kernel sends plain eager tensors the same way as the
    public functions (a gradient wanted: the autograd.Function; none: the kernel itself, skipping
    torch's generated wrapper and its redispatch, ~12 µs per torch.ops call on the H200 host: bench/
    NOTES.md "Dispatch") and everything else (tracing, FakeTensor, subclasses) to the kernel that
    torch.library.register_autograd would have installed, so torch.compile sees the same op."""
    eager_fn = EAGER_AUTOGRAD[name] = autograd_function(name, kernel, setup_context, backward)
    try:  # torch's generated kernel, as register_autograd makes it (torch/library.py)
        from torch._library.autograd import Info, make_autograd_impl
        generated = make_autograd_impl(getattr(torch.ops.sinkops, name).default, Info(backward, setup_context))
    except (ImportError, AttributeError, TypeError):  # another torch: the public route, without the shortcut
        torch.library.register_autograd(f"sinkops::{name}", backward, setup_context=setup_context, lib=LIB)
        return

    def autograd_kernel(keyset, *args):
        if not plain(args[0]):
            return generated(keyset, *args)
        if wants_grad(*args):
            return eager_fn(*args)
        return kernel(*args)

    LIB.impl(name, autograd_kernel, "Autograd", with_keyset=True)


# torch._C._any_requires_grad(*objects): True when any tensor among them requires grad (None and
# non-tensors are skipped), in C++: ~1 µs less per call than a generator over the tensors.
_any_requires_grad = getattr(torch._C, "_any_requires_grad", None) or (
    lambda *ts: any(isinstance(t, torch.Tensor) and t.requires_grad for t in ts))


def wants_grad(*tensors) -> bool:
    return torch._C.is_grad_enabled() and _any_requires_grad(*tensors)


def no_grad_through_out(out, *grad_inputs) -> None:
    """out= writes in place, which autograd cannot differentiate (as torch's own out= ops)."""
    if out is not None and wants_grad(*grad_inputs):
        raise ValueError("out: not supported when gradients are needed (drop out=, or run under torch.no_grad())")


# op name -> the eager autograd path (autograd_function), installed by the backward modules
EAGER_AUTOGRAD: dict = {}


class PlanCache(dict):
    """Call signature -> plan. Bounded so that pathological callers (a new stride per call) cannot
    grow it without limit; dropping everything at the bound is simpler than LRU and rare."""

    LIMIT = 4096
    ALL: list = []  # every cache, so that set_input_checks() can drop the plans

    def __init__(self):
        super().__init__()
        PlanCache.ALL.append(self)

    def put(self, key, plan):
        if key is not None:
            if len(self) >= self.LIMIT:
                self.clear()
            self[key] = plan
        return plan


def dispatch(plans: PlanCache, key, make_plan, bind, plan_args: tuple, bind_args: tuple, backend: str):
    """The one path of every call: signature -> plan -> per-call args -> launch.

    key: the call signature (None when it could not be formed: make_plan then raises the error
    that names the bad argument); make_plan(*plan_args) validates a new signature;
    bind(plan, *bind_args) -> (outputs, args or None when there is nothing to launch) does the
    per-call checks and allocations. The backend is chosen and prepared on the first call of a
    signature that launches."""
    plan = None
    if key is not None:
        try:
            plan = plans.get(key)
        except TypeError:  # an unhashable argument (a list window_size, say): validate it fully
            key = None
    if plan is None:
        plan = make_plan(*plan_args)
        outputs, args = bind(plan, *bind_args)
        if args is None:  # nothing to launch, nothing learned about backends: not cached
            return outputs
        plan.backend = backends.resolve(backend, args)
        plan.launch = plan.backend.prepare(args)
        plans.put(key, plan)
    else:
        outputs, args = bind(plan, *bind_args)
    if args is not None:
        plan.launch(args)
    return outputs
