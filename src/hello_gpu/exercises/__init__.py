"""exercises/: check a learner's kernel for one of the operators, with hints (``hello_gpu.exercise``).

- :mod:`.run`: :func:`exercise`, the learner's rung through the ladders' checker, diagnostics, timing;
- :mod:`.hints`: the hint table (data);
- :mod:`.detect`: the source patterns behind the "possible" hints;
- :mod:`.report`: :class:`ExerciseReport` and its renderings (text, HTML, Markdown).

The layer above agent (it uses the agent's sandbox folder and guarded buffers), below the faces.
"""

from .hints import HINTS, HintRule
from .report import Case, ExerciseReport, Finding, Timing
from .run import ExerciseError, exercise

__all__ = ["HINTS", "Case", "ExerciseError", "ExerciseReport", "Finding", "HintRule", "Timing", "exercise"]
