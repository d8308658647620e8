"""Which compiled cores this install has, why one is missing, and which backends can run here.

    python -m sinkops        # prints it (pip hides the build's own messages unless run with -v)
"""
from __future__ import annotations

import torch


def build_info() -> dict:
    """{"version", "cores": {core: what the build did}, "backends": {name: '' or why not, per device}}."""
    import sinkops
    from sinkops import backends

    try:
        from sinkops import _build_info
        cores = dict(_build_info.CORES)
    except ImportError:
        cores = {"cuda": "not built (running from a source tree without `pip install .`)",
                 "sycl": "not built (running from a source tree without `pip install .`)"}
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    usable = {}
    for name in backends.NAMES[1:]:
        usable[name] = {str(d): backends.why_unavailable(name, d) for d in devices}
    return {"version": sinkops.__version__, "cores": cores, "backends": usable}


def main() -> None:
    info = build_info()
    print(f"sinkops {info['version']}")
    for core, what in info["cores"].items():
        print(f"  core {core}: {what}")
    for name, per_device in info["backends"].items():
        for device, why in per_device.items():
            print(f"  backend {name:<6} on {device:<4}: {'ok' if not why else why}")
