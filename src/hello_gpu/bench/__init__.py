"""bench/: how fast. Timing you can defend, paired comparisons, work model, ceilings, records, plots."""

from .ceilings import Ceilings, cached_ceilings, measure_ceilings
from .compare import Comparison, compare
from .stats import Ratio, Summary, paired_ratio, summarize
from .timing import Measurement, measure
from .work import Rates, Work, WorkModelError, rates

__all__ = ["Ceilings", "Comparison", "Measurement", "Ratio", "Rates", "Summary", "Work", "WorkModelError",
           "cached_ceilings", "compare", "measure", "measure_ceilings", "paired_ratio", "rates", "summarize"]
