"""bench/: how fast. Timing you can defend, paired comparisons, work model, ceilings, records, plots."""

from .ceilings import Ceilings, cached_ceilings, measure_ceilings
from .compare import Comparison, DeviceTimer, WallTimer, compare
from .records import repository_root
from .stats import Ratio, Summary, paired_ratio, summarize
from .timing import Measurement, measure, uses_gpu
from .roof import current_roof, roof_for
from .work import Rates, Roof, Work, WorkModelError, rates

__all__ = ["Ceilings", "Comparison", "DeviceTimer", "Measurement", "Ratio", "Rates", "Roof", "Summary", "WallTimer",
           "Work", "WorkModelError", "cached_ceilings", "compare", "current_roof", "measure", "measure_ceilings",
           "paired_ratio", "rates", "repository_root", "roof_for", "summarize", "uses_gpu"]
