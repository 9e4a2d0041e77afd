# The types of pinlab's lazily loaded exports (pinlab/__init__.py loads them on first use).
from pinlab import bench as bench
from pinlab.api import BUILTIN as BUILTIN
from pinlab.api import Run as Run
from pinlab.api import RunResult as RunResult
from pinlab.api import Scenario as Scenario
from pinlab.api import Verdict as Verdict
from pinlab.api import judge as judge
from pinlab.api import load_scenario as load_scenario
from pinlab.api import run as run
from pinlab.api import run_variant as run_variant

__version__: str
__all__: list[str]
