"""bench/: how fast. Timing you can defend, paired comparisons, work model, ceilings, records, plots."""

from .ceilings import Ceilings, cached_ceilings, measure_ceilings
from .compare import Comparison, DeviceTimer, WallTimer, compare
from .records import repository_root
from .stats import Ratio, Summary, paired_ratio, summarize
from .timing import Measurement, measure, uses_gpu
from .work import Rates, Work, WorkModelError, rates

__all__ = ["Ceilings", "Comparison", "DeviceTimer", "Measurement", "Ratio", "Rates", "Summary", "WallTimer", "Work",
           "WorkModelError", "cached_ceilings", "compare", "measure", "measure_ceilings", "paired_ratio", "rates",
           "repository_root", "summarize", "uses_gpu"]
