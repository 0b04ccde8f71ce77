"""CI must run the README's own test command, word for word."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the tests", 1)[1]
    command = re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).strip()
    assert command in (ROOT / ".ci" / "run").read_text()
    assert command.endswith("pytest")
