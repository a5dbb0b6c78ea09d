"""``scripts/measure_prefix_reuse.py`` counts the builds that raise and goes on.

Why: on tau-bench with the 14-tool fixture a window of 3000 made some turn's required context
(the current input and the tools its calls need) exceed the budget; the script stopped at that
first RequiredContextExceedsBudgetError with a traceback, so no figure for any provider or window
after it was printed. A failed build sends no request: the script now counts such builds per
provider and window, by error type, and measures the turns around them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, PolicySet, ToolSpec, ToolsRegistered, UserInput

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "measure_prefix_reuse.py"


def test_a_build_that_raises_is_counted_and_the_measure_goes_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    with open_store(url) as store:
        run = store.run("big/1")
        # a pinned tool whose schema alone is more than a 3000-token window holds: the first
        # turn's build raises; the policy then unpins it, and the later builds succeed
        big = {"type": "object", "properties": {
            f"p{i}": {"type": "string", "description": "a long description of the parameter " * 8}
            for i in range(80)}}
        run.append(PolicySet(text="You are an assistant.", pinned_tools=("deploy",)),
                   ToolsRegistered(tools=(ToolSpec(name="deploy", description="deploy", parameters=big),)),
                   UserInput("Deploy it."), ModelResponse(text="Which one?"),
                   PolicySet(text="You are an assistant."), UserInput("The service."),
                   ModelResponse(text="Yes."), UserInput("Thanks."), ModelResponse(text="Bye."))
    out = subprocess.run([sys.executable, str(SCRIPT), "--store", url, "--windows", "3000,200000",
                          "--providers", "anthropic,openai-chat"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4, out.stdout  # every provider and window measured
    small = [line for line in lines if "window    3000" in line]
    large = [line for line in lines if "window  200000" in line]
    assert len(small) == len(large) == 2, out.stdout
    for line in small:  # the first turn failed: one turn compared (the third with the second)
        assert "1 turns" in line and "failed builds 1 (RequiredContextExceedsBudgetError 1)" in line, line
    for line in large:
        assert "2 turns" in line and "failed builds 0" in line, line
