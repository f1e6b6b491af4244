"""A zero-block launch is evidence, not a silent no-op (issue 17, part 5): the runtime counts launches it
skips for an empty grid, and the worker running a candidate's timed calls reports any as a failure of
its bench and compare (agent.session), which the agent never accepts. The launches themselves need a GPU
(tests/gpu/test_kernelbench_gpu.py); here the counting and the reason."""

from hello_gpu.agent.sandbox import empty_launch_reason as _empty_launch_reason
from hello_gpu.runtime import empty_launches
from hello_gpu.runtime.kernel import _count_empty_launch


def test_skipped_launches_are_counted_per_kernel_and_named_in_the_reason():
    before = empty_launches()
    assert _empty_launch_reason(before) is None                       # nothing skipped since: no reason
    _count_empty_launch("sum_kernel")
    _count_empty_launch("sum_kernel")
    after = empty_launches()
    assert after["sum_kernel"] == before.get("sum_kernel", 0) + 2
    reason = _empty_launch_reason(before)
    assert reason and "empty grid" in reason and "sum_kernel x2" in reason
    assert _empty_launch_reason(after) is None                        # only launches after the snapshot count
    after["sum_kernel"] = 0                                           # a copy: the caller cannot reset the count
    assert empty_launches()["sum_kernel"] == before.get("sum_kernel", 0) + 2
