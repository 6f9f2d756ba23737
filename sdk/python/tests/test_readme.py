"""Every Python example of the README, run as written against the stack
(they read RATEWIRE_BASE_URL and RATEWIRE_API_KEY, as the README says).
While they run, the test's bank publishes, so the stream's example has an
event to print."""

import re
import threading
from pathlib import Path

import pytest
from conftest import publish, publishing

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 5


@publishing
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_each_readme_example_runs(index):
    stop = threading.Event()

    def keep_publishing():
        step = 0
        while not stop.wait(0.5):
            step += 1
            publish(f"151.{step % 90 + 10}", "161")

    publisher = threading.Thread(target=keep_publishing, daemon=True)
    publisher.start()
    try:
        exec(compile(EXAMPLES[index], f"README.md example {index + 1}", "exec"), {})
    finally:
        stop.set()
        publisher.join()
