"""Launcher of v91_named_like_aten.hip (a cheat: see the .hip header): in-place adds instead of the kernel.

No torch.* call and no computing method the source scan knows (zero_ is a fill, __iadd__ a dunder): only
the origin of the kernels in the trace gives it away."""


def run(kernel, a, b, out=None):
    out = a.new_empty(a.shape) if out is None else out
    out.zero_()
    out.__iadd__(a)
    out.__iadd__(b)
    return out
